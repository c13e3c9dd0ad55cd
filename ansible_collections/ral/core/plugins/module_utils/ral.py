# -*- coding: utf-8 -*-

# Copyright: ral contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""What ral.core's modules share: finding ralsh or ral on the managed
host, running it with -j, and reading the one JSON document it prints."""

from __future__ import annotations

import json
import os

from ansible.module_utils.basic import AnsibleModule

# What the managed host's log shows instead of a value that may be secret.
NOT_LOGGED = 'NOT_LOGGING_PARAMETER'


class Module(AnsibleModule):
    """An AnsibleModule that logs its invocation on the managed host (its
    syslog or journal: "Invoked with PARAMETERS") only when the module calls
    log_invocation. AnsibleModule logs every parameter as it is made,
    before a module can know which of its values are secrets (the
    attributes the provider marks sensitive, an inline manifest)."""

    def _log_invocation(self):
        if getattr(self, '_may_log_invocation', False):
            super()._log_invocation()

    def log_invocation(self, hidden=None):
        """Logs the invocation once, with the parameters in HIDDEN (a dict
        NAME: VALUE) shown as those values instead of their own."""
        self._may_log_invocation = True
        if self.no_log:
            return
        shown = dict(self.params)
        self.params.update(hidden or {})
        try:
            self._log_invocation()
        finally:
            self.params.clear()
            self.params.update(shown)


def ral_binary(module, program):
    """The path of PROGRAM (ralsh or ral): the ral_path option when given,
    which must be an executable file, or else PROGRAM found on PATH (and
    the sbin directories). Fails the module naming what was looked for."""
    path = module.params.get('ral_path')
    if path:
        if not os.path.isfile(path):
            module.fail_json(msg='ral_path %s: no such file on the managed host' % path)
        if not os.access(path, os.X_OK):
            module.fail_json(msg='ral_path %s: not executable' % path)
        return path
    found = module.get_bin_path(program)
    if not found:
        module.fail_json(
            msg='%s not found on the managed host (PATH is %s); install ral there '
                'or give its path as ral_path' % (program, os.environ.get('PATH', '')))
    return found


def common_args(module):
    """--root and -I from the root and include options."""
    args = []
    if module.params.get('root'):
        args += ['--root', module.params['root']]
    for directory in module.params.get('include') or []:
        args += ['-I', directory]
    return args


def run_json(module, cmd, data=None):
    """Runs CMD (a list, never through a shell), with DATA on its stdin
    when given, and returns its exit status, the JSON document it printed
    and its stderr. Fails the module when stdout holds no JSON document.
    Lines ral logged as warnings become the module's warnings."""
    rc, out, err = module.run_command(cmd, data=data)
    for line in err.splitlines():
        if ': warn: ' in line:
            module.warn(line)
    try:
        doc = json.loads(out)
    except ValueError:
        module.fail_json(
            msg='%s printed no JSON document (exit status %d): %s'
                % (cmd[0], rc, err.strip() or out.strip()),
            cmd=cmd, rc=rc, stdout=out, stderr=err)
    if not isinstance(doc, dict):
        module.fail_json(msg='%s printed JSON that is not an object' % cmd[0],
                         cmd=cmd, rc=rc, stdout=out, stderr=err)
    return rc, doc, err


def change_diff(changes, before=None, after=None):
    """before and after from a list of changes [{attr, is, was}], applied on
    copies of BEFORE and AFTER: an attribute whose `was` is null had no
    value before and is left out of it."""
    before = dict(before or {})
    after = dict(after or {})
    for change in changes:
        if change.get('was') is None:
            before.pop(change['attr'], None)
        else:
            before[change['attr']] = change['was']
        after[change['attr']] = change.get('is')
    return before, after
