from localjudge.cli import main

main()
