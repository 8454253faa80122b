"""Run a command under a seccomp filter built with libseccomp, as systemd
builds a unit's SystemCallFilter=: the listed system calls are allowed and
every other one gets the default action (an errno, as with
SystemCallErrorNumber=, or "kill": the process dies with SIGSYS).

usage: seccomp_exec.py ALLOWED_FILE ERRNO_NAME|kill -- COMMAND [ARG...]
"""
import errno
import os
import sys

import seccomp


def main():
    allowed_file, action, sep = sys.argv[1:4]
    if sep != "--" or len(sys.argv) < 5:
        sys.exit(__doc__)
    if action == "kill":
        default = seccomp.KILL_PROCESS
    else:
        default = seccomp.ERRNO(getattr(errno, action))
    f = seccomp.SyscallFilter(defaction=default)
    with open(allowed_file) as names:
        for name in names.read().split():
            try:
                f.add_rule(seccomp.ALLOW, name)
            except (RuntimeError, ValueError, OSError):
                pass  # not a system call of this architecture, as systemd skips it
    f.load()  # sets no_new_privs, as NoNewPrivileges=yes does
    os.execv(sys.argv[4], sys.argv[4:])


main()
