from chongming.cli.app import main

main()
