"""Deployment definitions: the Helm charts, the image, the compose file (SPEC §13).

The chart tests need the static helm from ``bash scripts/install-helm.sh``. Without it they
skip on a developer machine and fail under CI (``CI`` set), so CI can never skip silently.
The Dockerfile, compose and "no restated default" checks need no tool and always run.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import all_versions, latest_version

from brain.settings import DEFAULTS, ENV_PREFIX, Settings

ROOT = Path(__file__).resolve().parents[1]
HELM = ROOT / ".tools" / "bin" / "helm"
CHARTS_DIR = ROOT / "helm"
OPS = "brain-ops"
KEEPER = "brain-keeper"

TICK_SCHEDULE = "7 */2 * * *"  # SPEC §13
# Issue 11 item 5: incremental extraction on the tick's schedule (was daily at 04:07 UTC).
EXTRACT_SCHEDULE = "*/5 * * * *"  # incremental extraction + keeper: new sessions reach the feed within 5 min
TICK_INTERVAL_SECONDS = 7200
UID = 10001
#: Oldest Kubernetes the charts support (Chart.yaml kubeVersion); the newest is the newest
#: schema kubernetes-validate ships.
OLDEST_KUBERNETES = "1.29.0"
NEWEST_KUBERNETES = latest_version()
SECRET_SETTINGS = ("BRAIN_LLM_API_KEY", "BRAIN_REDIS_URL")
SETTING_NAMES = {ENV_PREFIX + name.upper() for name in Settings.__dataclass_fields__}
#: Text that would be a credential in clear (the redaction module's provider patterns, briefly).
PLAINTEXT_SECRET = re.compile(
    r"sk-[A-Za-z0-9_-]{16,}|sk-ant-[A-Za-z0-9_-]{8,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}"
    r"|AKIA[0-9A-Z]{16}|-----BEGIN [A-Z ]*PRIVATE KEY-----|redis://[^\s:@/]*:[^\s@/]+@|eyJ[A-Za-z0-9_-]{10,}\."
)


# --- helm ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def helm() -> Path:
    if HELM.is_file() and os.access(HELM, os.X_OK):
        return HELM
    message = f"{HELM.relative_to(ROOT)} is missing: run `bash scripts/install-helm.sh`"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI must not skip the chart tests)")
    pytest.skip(message)


def values_files(chart: str) -> list[str | None]:
    """Default values (None) and every example values file of the chart."""
    return [None, *sorted(str(p.relative_to(ROOT)) for p in (CHARTS_DIR / chart / "ci").glob("*.yaml"))]


CASES = [(chart, values) for chart in (OPS, KEEPER) for values in values_files(chart)]
CASE_IDS = [f"{chart}:{Path(values).name if values else 'defaults'}" for chart, values in CASES]


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HELM), *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


@functools.cache
def render_text(chart: str, values: str | None = None, sets: tuple[str, ...] = ()) -> str:
    args = ["template", "brain", str(CHARTS_DIR / chart), "--namespace", "brain"]
    if values:
        args += ["-f", values]
    for item in sets:
        args += ["--set", item]
    done = run_helm(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def render(chart: str, values: str | None = None, sets: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(render_text(chart, values, sets)) if doc]


def only(objects: list[dict[str, Any]], kind: str, suffix: str = "") -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]
    assert len(found) == 1, (
        f"expected one {kind} named *{suffix}, found {[o['metadata']['name'] for o in found]}"
    )
    return found[0]


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return obj["spec"]["template"]["spec"]


def workloads(objects: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    return (o for o in objects if o["kind"] in {"CronJob", "Deployment", "StatefulSet"})


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def mounts(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["mountPath"]: m for m in container.get("volumeMounts", [])}


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


@pytest.mark.parametrize(("chart", "values"), CASES, ids=CASE_IDS)
def test_chart_lints_strict(helm: Path, chart: str, values: str | None) -> None:
    args = ["lint", "--strict", str(CHARTS_DIR / chart)]
    if values:
        args += ["-f", values]
    done = run_helm(*args)
    assert done.returncode == 0, done.stdout + done.stderr


def test_validated_kubernetes_versions_exist() -> None:
    versions = set(all_versions())
    assert OLDEST_KUBERNETES in versions
    assert tuple(map(int, NEWEST_KUBERNETES.split(".")[:2])) >= (1, 34)
    kube_version = yaml.safe_load((CHARTS_DIR / OPS / "Chart.yaml").read_text())["kubeVersion"]
    assert kube_version == f">={OLDEST_KUBERNETES}-0"


@pytest.mark.parametrize("version", [OLDEST_KUBERNETES, NEWEST_KUBERNETES])
@pytest.mark.parametrize(("chart", "values"), CASES, ids=CASE_IDS)
def test_rendered_manifests_validate_strict(helm: Path, chart: str, values: str | None, version: str) -> None:
    objects = render(chart, values)
    assert objects
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(
                f"{obj['kind']}/{obj['metadata']['name']} against {version}: {exc.message} at {exc.path}"
            )


@pytest.mark.parametrize(("chart", "values"), CASES, ids=CASE_IDS)
def test_every_container_is_non_root_read_only_and_bounded(
    helm: Path, chart: str, values: str | None
) -> None:
    objects = render(chart, values)
    for obj in workloads(objects):
        spec = pod_spec(obj)
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] == UID
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
        assert spec["automountServiceAccountToken"] is False
        for c in containers(spec):
            sc = c["securityContext"]
            where = f"{obj['metadata']['name']}/{c['name']}"
            assert sc["runAsNonRoot"] is True and sc["runAsUser"] == UID, where
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["capabilities"]["drop"] == ["ALL"], where
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, where
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(c["resources"][kind]), where
            tmp = mounts(c)["/tmp"]
            tmp_volume = next(v for v in spec["volumes"] if v["name"] == tmp["name"])
            assert "emptyDir" in tmp_volume, where
            vault = mounts(c)["/vault"]
            assert not vault.get("readOnly", False), where


@pytest.mark.parametrize(("chart", "values"), CASES, ids=CASE_IDS)
def test_secrets_only_by_reference(helm: Path, chart: str, values: str | None) -> None:
    objects = render(chart, values)
    assert not [o for o in objects if o["kind"] == "Secret"], "the charts never carry a Secret"
    assert not PLAINTEXT_SECRET.search(render_text(chart, values))
    secretish = re.compile(r"KEY|TOKEN|PASSWORD|SECRET|REDIS_URL")
    for obj in workloads(objects):
        for c in containers(pod_spec(obj)):
            for name, entry in env_of(c).items():
                if secretish.search(name):
                    assert "value" not in entry, f"{name} in clear in {obj['metadata']['name']}"
                    assert "secretKeyRef" in entry["valueFrom"], name


@pytest.mark.parametrize("chart", [OPS, KEEPER])
@pytest.mark.parametrize("name", SECRET_SETTINGS)
def test_secret_settings_in_env_values_are_refused(helm: Path, chart: str, name: str) -> None:
    done = run_helm(
        "template", "brain", str(CHARTS_DIR / chart), "--set", f"env.{name}=sk-live-0123456789abcdef"
    )
    assert done.returncode != 0
    assert "secrets never go in values" in done.stderr


def undocumented_values(text: str) -> list[str]:
    """Keys of a values.yaml with no comment right above them or above an enclosing key."""
    missing: list[str] = []
    stack: list[tuple[int, bool]] = []  # (indent, documented) of the enclosing keys
    previous = ""
    for line in text.splitlines():
        stripped = line.strip()
        key = re.match(r"( *)([A-Za-z_][\w.-]*):", line)
        if key and not stripped.startswith("#"):
            indent = len(key.group(1))
            while stack and stack[-1][0] >= indent:
                stack.pop()
            documented = previous.startswith("#") or any(d for _, d in stack)
            if not documented:
                missing.append(key.group(2))
            stack.append((indent, documented))
        if stripped:
            previous = stripped
    return missing


@pytest.mark.parametrize("chart", [OPS, KEEPER])
def test_every_value_is_documented(chart: str) -> None:
    assert undocumented_values((CHARTS_DIR / chart / "values.yaml").read_text()) == []
    assert undocumented_values("a: 1\n# -- doc\nb:\n  c: 2\n") == ["a"]


# --- brain-ops ----------------------------------------------------------------------------


@pytest.mark.parametrize(("suffix", "schedule"), [("-tick", TICK_SCHEDULE), ("-extract", EXTRACT_SCHEDULE)])
def test_cronjob_schedule_and_run_limits(helm: Path, suffix: str, schedule: str) -> None:
    cronjob = only(render(OPS), "CronJob", suffix)
    spec = cronjob["spec"]
    assert spec["schedule"] == schedule
    assert spec["timeZone"] == "Etc/UTC"
    assert spec["concurrencyPolicy"] == "Forbid"
    assert spec["startingDeadlineSeconds"] > 0
    job = spec["jobTemplate"]["spec"]
    assert job["activeDeadlineSeconds"] > 0
    pod = pod_spec(cronjob)
    assert pod["restartPolicy"] == "Never"
    # Retry only "another process holds the vault lock" (exit 3); other failures are final.
    assert job["backoffLimit"] > 0
    fail_rule = next(r for r in job["podFailurePolicy"]["rules"] if r["action"] == "FailJob")
    assert fail_rule["onExitCodes"] == {
        "containerName": pod["containers"][0]["name"],
        "operator": "NotIn",
        "values": [3],
    }


def test_tick_cronjob(helm: Path) -> None:
    (container,) = pod_spec(only(render(OPS), "CronJob", "-tick"))["containers"]
    assert container["args"] == ["tick", "--vault", "/vault"]
    assert "command" not in container  # the image's ENTRYPOINT is `brain`
    env = env_of(container)
    assert env["BRAIN_LLM_API_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "brain-secrets",
        "key": "llm-api-key",
        "optional": True,
    }
    assert env["BRAIN_REDIS_URL"]["valueFrom"]["secretKeyRef"]["name"] == "brain-secrets"
    assert "/shared" not in mounts(container)


def test_extract_cronjob(helm: Path) -> None:
    pod = pod_spec(only(render(OPS), "CronJob", "-extract"))
    (container,) = pod["containers"]
    shell, flag, script, script_name = container["command"]
    assert (shell, flag, script_name) == ("/bin/bash", "-c", "extract")
    assert "set -euo pipefail" in script
    assert 'brain extract "$@" | brain cluster --out-dir "/vault/clusters/${day}" --vault /vault' in script
    # New arcs reach the feed at once: the deterministic keeper runs after every extraction.
    assert script.rstrip().endswith("brain keeper --vault /vault")
    assert 'day="$(date -u +%F)"' in script
    args = container["args"]
    assert args[args.index("--since") + 1] == DEFAULTS.since
    assert args[args.index("--projects-dir") + 1].startswith("/shared/")
    # Fresh by default: every agent, Codex on, the settings' min-turns, the cursor in the vault.
    assert args[args.index("--agent") + 1] == "all"
    assert args[args.index("--codex-dir") + 1] == "/shared/.codex/sessions"
    assert args[args.index("--min-turns") + 1] == str(DEFAULTS.min_turns)
    assert args[args.index("--vault") + 1] == "/vault"
    shared = mounts(container)["/shared"]
    assert shared["readOnly"] is True
    volume = next(v for v in pod["volumes"] if v["name"] == shared["name"])
    assert volume["persistentVolumeClaim"]["readOnly"] is True
    # Extraction needs no credential.
    assert not [e for e in container.get("env", []) if "valueFrom" in e]


def test_extract_reads_nfs_read_only_and_codex_when_configured(helm: Path) -> None:
    objects = render(OPS, "helm/brain-ops/ci/example-values.yaml")
    extract = only(objects, "CronJob", "-extract")
    pod = pod_spec(extract)
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["sessions"]["nfs"]["readOnly"] is True
    assert volumes["vault"]["nfs"] == {"server": "nfs.example.internal", "path": "/exports/brain/vault"}
    args = pod["containers"][0]["args"]
    assert args[args.index("--codex-dir") + 1] == "/shared/.codex/sessions"
    assert args[args.index("--agent") + 1] == "all"
    assert not [o for o in objects if o["kind"] == "PersistentVolumeClaim"]


def test_amygdala_deployment(helm: Path) -> None:
    objects = render(OPS)
    deployment = only(objects, "Deployment", "-amygdala")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    (container,) = pod_spec(deployment)["containers"]
    assert container["args"] == ["amygdala", "--vault", "/vault", "--continuous"]
    redis = env_of(container)["BRAIN_REDIS_URL"]["valueFrom"]["secretKeyRef"]
    assert redis == {"name": "brain-secrets", "key": "redis-url", "optional": False}
    assert "BRAIN_LLM_API_KEY" not in env_of(container)
    disabled = render(OPS, "helm/brain-ops/ci/existing-pvc-values.yaml")
    assert not [o for o in disabled if o["kind"] == "Deployment"]


def test_vault_pvc_is_read_write_many_and_kept_on_uninstall(helm: Path) -> None:
    objects = render(OPS)
    pvc = only(objects, "PersistentVolumeClaim")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    for obj in workloads(objects):
        volume = next(v for v in pod_spec(obj)["volumes"] if v["name"] == "vault")
        assert volume["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]


def test_existing_claim_with_sub_path(helm: Path) -> None:
    objects = render(OPS, "helm/brain-ops/ci/existing-pvc-values.yaml")
    assert not [o for o in objects if o["kind"] in {"PersistentVolumeClaim", "ServiceAccount"}]
    tick = only(objects, "CronJob", "-tick")
    (container,) = pod_spec(tick)["containers"]
    assert container["args"] == ["tick", "--vault", "/vault", "--no-ai"]
    assert mounts(container)["/vault"]["subPath"] == "brain"
    assert "initContainers" not in pod_spec(tick)


def test_env_values_reach_every_container(helm: Path) -> None:
    objects = render(OPS, "helm/brain-ops/ci/example-values.yaml")
    for obj in workloads(objects):
        for c in pod_spec(obj)["containers"]:
            assert env_of(c)["BRAIN_LLM_URL"]["value"] == "http://litellm.litellm.svc.cluster.local:4000"


def test_extraction_without_feed_refresh_leaves_the_feed_to_the_tick(helm: Path) -> None:
    objects = render(OPS, sets=("extract.refreshFeed=false",))
    (container,) = pod_spec(only(objects, "CronJob", "-extract"))["containers"]
    assert "brain keeper" not in container["command"][2]


def test_missing_nfs_server_is_a_render_error(helm: Path) -> None:
    done = run_helm("template", "brain", str(CHARTS_DIR / OPS), "--set", "vault.type=nfs")
    assert done.returncode != 0
    assert "vault.nfs.server is required" in done.stderr


# --- brain-keeper -------------------------------------------------------------------------


PROFILE = ROOT / "profiles" / "brain-keeper"
PROFILE_COPY = CHARTS_DIR / KEEPER / "files" / "profile"


def test_profile_copy_in_chart_is_identical() -> None:
    """Helm reads only files inside the chart: its copy must be the profile, byte for byte."""
    source = {p.name: p.read_bytes() for p in PROFILE.iterdir() if p.is_file()}
    copy = {p.name: p.read_bytes() for p in PROFILE_COPY.iterdir() if p.is_file()}
    assert source, "profiles/brain-keeper/ is empty"
    assert copy == source, "refresh with: cp profiles/brain-keeper/*.md helm/brain-keeper/files/profile/"


def test_keeper_statefulset(helm: Path) -> None:
    objects = render(KEEPER)
    sts = only(objects, "StatefulSet")
    service = only(objects, "Service")
    assert service["spec"]["clusterIP"] == "None"
    assert sts["spec"]["serviceName"] == service["metadata"]["name"]
    pod = pod_spec(sts)
    (container,) = pod["containers"]
    env = env_of(container)
    values = yaml.safe_load((CHARTS_DIR / KEEPER / "values.yaml").read_text())
    assert env[values["modelEnv"]]["value"] == values["model"]
    assert env["ANTHROPIC_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "brain-keeper-secrets"
    profile_mount = mounts(container)[values["profile"]["mountPath"]]
    assert profile_mount["readOnly"] is True
    config_map = only(objects, "ConfigMap", "-profile")
    volume = next(v for v in pod["volumes"] if v["name"] == profile_mount["name"])
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert config_map["data"] == {p.name: p.read_text() for p in PROFILE.glob("*.md")}
    assert sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "workspace"
    assert "checksum/profile" in sts["spec"]["template"]["metadata"]["annotations"]


def test_keeper_example_values(helm: Path) -> None:
    objects = render(KEEPER, "helm/brain-keeper/ci/example-values.yaml")
    sts = only(objects, "StatefulSet")
    pod = pod_spec(sts)
    (container,) = pod["containers"]
    assert container["command"] == ["agent-runtime"]
    assert env_of(container)["LITELLM_API_KEY"]["valueFrom"]["secretKeyRef"]["key"] == "litellm-key"
    assert "volumeClaimTemplates" not in sts["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes["workspace"]
    assert volumes["vault"]["nfs"]["server"] == "nfs.example.internal"


# --- the image ------------------------------------------------------------------------------


DOCKERFILE = ROOT / "services" / "tick-engine" / "Dockerfile"


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), " ".join(rest.split())))
    return out


def test_dockerfile_follows_the_runtime_contract() -> None:
    steps = dockerfile_instructions()
    args = dict(rest.split("=", 1) for kw, rest in steps if kw == "ARG" and "=" in rest)
    bases = [rest.split()[0] for kw, rest in steps if kw == "FROM"]
    assert bases and all(b in ("python:3.12-slim", "${PYTHON_IMAGE}") for b in bases)
    assert args.get("PYTHON_IMAGE") == "python:3.12-slim"
    final = steps[max(i for i, (kw, _) in enumerate(steps) if kw == "FROM") :]
    kinds = [kw for kw, _ in final]
    users = [rest for kw, rest in final if kw == "USER"]
    assert users and users[-1] in (f"{UID}", f"{UID}:{UID}")
    assert ("ENTRYPOINT", '["brain"]') in final
    env = " ".join(rest for kw, rest in final if kw == "ENV")
    for setting in ("HOME=/tmp", "TMPDIR=/tmp", "PYTHONDONTWRITEBYTECODE=1"):
        assert setting in env
    assert "USER" in kinds and kinds.index("USER") > kinds.index("COPY")
    installs = [rest for kw, rest in steps if kw == "RUN" and "pip install" in rest]
    assert installs and not [r for r in installs if re.search(r"\s(-e|--editable)\s", r)]
    assert any(re.search(r"pip install( --\S+)* \.(\s|$)", r) for r in installs)
    assert re.search(rf"useradd .*--uid {UID}", " ".join(r for kw, r in final if kw == "RUN"))


def test_dockerignore_keeps_what_the_build_copies() -> None:
    """The context is the repo root: an allow-list that still holds every COPY source."""
    ignore = [
        ln.strip()
        for ln in (ROOT / ".dockerignore").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    assert ignore[0] == "*"
    allowed = {ln[1:].rstrip("/") for ln in ignore if ln.startswith("!")}
    for kw, rest in dockerfile_instructions():
        if kw == "COPY" and "--from" not in rest:
            for source in rest.split()[:-1]:
                assert source.rstrip("/") in allowed, source
                assert (ROOT / source).exists() or source == "README.md", source


# --- compose ----------------------------------------------------------------------------------


def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def test_compose_services() -> None:
    services = compose()["services"]
    assert {"tick", "amygdala", "redis"} <= set(services)
    tick = services["tick"]
    loop = " ".join(tick["command"])
    assert tick["entrypoint"] == ["sh", "-c"]
    assert f"while true; do brain tick --vault /vault; sleep {TICK_INTERVAL_SECONDS}; done" in loop
    assert services["amygdala"]["command"] == ["amygdala", "--vault", "/vault", "--continuous"]
    for name in ("tick", "amygdala", "extract"):
        service = services[name]
        assert "./vault:/vault" in service["volumes"], name
        assert service["read_only"] is True and service["cap_drop"] == ["ALL"], name
        assert service["tmpfs"] == ["/tmp"], name
        assert service["env_file"] == [{"path": ".env", "required": False}], name
    assert "redis" in services["tick"]["depends_on"]
    shared = [v for v in services["extract"]["volumes"] if ":/shared" in v]
    assert shared and all(v.endswith(":ro") for v in shared)
    assert (ROOT / ".env.example").is_file()


def test_no_secret_values_in_compose_or_env_example() -> None:
    for path in (ROOT / "compose.yaml", ROOT / ".env.example"):
        assert not PLAINTEXT_SECRET.search(path.read_text()), path
    example = dict(
        line.split("=", 1)
        for line in (ROOT / ".env.example").read_text().splitlines()
        if line and not line.startswith("#")
    )
    for name in SECRET_SETTINGS:
        assert example[name] == "", f"{name} must be empty in .env.example"


# --- no restated default differs from brain.settings -------------------------------------------


def default_text(name: str) -> str | None:
    value = getattr(DEFAULTS, name[len(ENV_PREFIX) :].lower())
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def assert_same_as_default(where: str, name: str, value: object) -> None:
    assert name in SETTING_NAMES, f"{where}: {name} is not a Brain setting"
    expected = default_text(name)
    if expected is not None and value not in (None, ""):
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        assert shown == expected, f"{where}: {name}={shown!r} restates a different default ({expected!r})"


@pytest.mark.parametrize("chart", [OPS, KEEPER])
def test_chart_values_restate_no_different_default(chart: str) -> None:
    values = yaml.safe_load((CHARTS_DIR / chart / "values.yaml").read_text())
    for name, value in (values.get("env") or {}).items():
        assert_same_as_default(f"{chart}/values.yaml env", name, value)
    for values_file in (CHARTS_DIR / chart / "ci").glob("*.yaml"):
        for name in yaml.safe_load(values_file.read_text()).get("env") or {}:
            if name.startswith(ENV_PREFIX):
                assert name in SETTING_NAMES, f"{values_file.name}: {name} is not a Brain setting"


def test_restated_flags_and_models_match_the_settings() -> None:
    ops = yaml.safe_load((CHARTS_DIR / OPS / "values.yaml").read_text())
    assert ops["extract"]["since"] == DEFAULTS.since
    assert ops["tick"]["schedule"] == TICK_SCHEDULE
    assert ops["extract"]["schedule"] == EXTRACT_SCHEDULE
    assert ops["tick"]["schedule"] == TICK_SCHEDULE
    assert ops["extract"]["minTurns"] == DEFAULTS.min_turns and ops["extract"]["agent"] == "all"
    keeper = yaml.safe_load((CHARTS_DIR / KEEPER / "values.yaml").read_text())
    assert keeper["model"] == DEFAULTS.llm_model
    agent = yaml.safe_load((ROOT / "agents" / "brain-keeper" / "agent.yaml").read_text())
    assert agent["model"] == DEFAULTS.llm_model
    extract = " ".join(compose()["services"]["extract"]["command"])
    assert f"--since {DEFAULTS.since} " in extract


def test_compose_and_env_example_restate_no_different_default() -> None:
    for name, service in compose()["services"].items():
        environment = service.get("environment") or {}
        for key, value in environment.items():
            if key.startswith(ENV_PREFIX):
                # "${VAR:-fallback}": the fallback is what compose passes when .env is silent.
                fallback = re.fullmatch(r"\$\{\w+:-(.*)\}", str(value))
                assert_same_as_default(f"compose.yaml {name}", key, fallback.group(1) if fallback else value)
    for line in (ROOT / ".env.example").read_text().splitlines():
        if line.startswith(ENV_PREFIX):
            key, _, value = line.partition("=")
            assert_same_as_default(".env.example", key, value)


#: Operator-facing text that may name settings.
DOC_FILES = [
    ROOT / "CLUSTERS.md",
    ROOT / "MARKERS.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "profiles" / "brain-keeper").glob("*.md")),
    ROOT / "agents" / "brain-keeper" / "README.md",
    CHARTS_DIR / OPS / "values.yaml",
    CHARTS_DIR / KEEPER / "values.yaml",
    CHARTS_DIR / OPS / "templates" / "NOTES.txt",
    CHARTS_DIR / KEEPER / "templates" / "NOTES.txt",
    ROOT / "compose.yaml",
    ROOT / ".env.example",
]
SETTING_MENTION = re.compile(r"\bBRAIN_[A-Z0-9]+(?:_[A-Z0-9]+)*\b")
DEFAULT_CLAIM = re.compile(r"`?(BRAIN_[A-Z0-9_]+)`?[^\n`]{0,40}?\bdefaults?\b[^\n`]{0,12}?`([^`]+)`")


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_name_only_real_settings_and_their_real_defaults(path: Path) -> None:
    text = path.read_text()
    unknown = sorted(set(SETTING_MENTION.findall(text)) - SETTING_NAMES)
    assert not unknown, f"{path.name} names settings that do not exist: {unknown}"
    for name, claimed in DEFAULT_CLAIM.findall(text):
        assert_same_as_default(path.name, name, claimed)


def test_schedules_and_stream_agree_everywhere() -> None:
    ops_doc = (ROOT / "docs" / "operations.md").read_text()
    assert f"`{TICK_SCHEDULE}`" in ops_doc and f"`{EXTRACT_SCHEDULE}`" in ops_doc
    assert f"sleep {TICK_INTERVAL_SECONDS}" in ops_doc
    assert TICK_INTERVAL_SECONDS == 2 * 3600 and TICK_SCHEDULE.split()[1] == "*/2"
    for path in DOC_FILES:
        for stream in re.findall(r"BRAIN_AMYGDALA_STREAM[=:]\s*\"?([\w:.-]+)", path.read_text()):
            assert stream == DEFAULTS.amygdala_stream, path.name
