from brain.launcher import main

main()
