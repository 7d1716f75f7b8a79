from brain.cli import main

main()
