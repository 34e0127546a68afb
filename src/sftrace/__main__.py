"""``python -m sftrace``: the ``sftrace`` command, for environments without the script."""

from sftrace._cli.main import main

if __name__ == "__main__":
    main()
