"""The one way a Python script of scripts/ refuses bad input (docs/reliability.md): a message that
names the script, the input and what is wrong, and exit 2; never a traceback (exit 1 stays for
our own bugs). A script puts scripts/lib/ on its path and runs its main through main_guard:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
    from script_errors import BadInput, main_guard, read_json
    ...
    if __name__ == "__main__":
        main_guard(main)
"""
import json
import os
import sys


class BadInput(Exception):
    """An input the user can fix; the message says which and how."""


def script_name():
    return os.path.splitext(os.path.basename(sys.argv[0]))[0]


def read_json(path, what="a JSON file"):
    """The parsed file, or BadInput naming it: missing, a folder, unreadable or not JSON."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise BadInput(f"{path} does not exist ({what})") from None
    except IsADirectoryError:
        raise BadInput(f"{path} is a folder, not {what}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"{path} is not valid JSON ({what}; truncated?): {e}") from None
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}") from None


def main_guard(main, *args):
    """Runs main(*args) and exits with its return value; bad input exits 2 with one line."""
    try:
        code = main(*args)
    except BadInput as e:
        print(f"{script_name()}: {e}", file=sys.stderr)
        sys.exit(2)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError) as e:
        print(f"{script_name()}: {e.filename}: {e.strerror}", file=sys.stderr)
        sys.exit(2)
    sys.exit(code or 0)
