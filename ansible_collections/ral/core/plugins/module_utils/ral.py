# -*- coding: utf-8 -*-

# Copyright: ral contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""What ral.core's modules share: finding ralsh or ral on the managed
host, running it with -j, and reading the one JSON document it prints;
and the private file that gives ral apply its variables (-e @FILE)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile

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


# The variable whose list names the sensitive variables (ral's
# templating::SENSITIVE_LIST).
SENSITIVE_LIST = 'ral_sensitive'

# Names every ral template has, which ral refuses as variables (its
# templating::RESERVED; inventory_hostname and group_names it takes from
# -e, as the host the run is for).
RESERVED = ('facts', 'item')

# What a variable may be named: what Jinja2 can name.
VARIABLE_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*\Z')

# The largest variables file ral reads (its templating::sources::MAX_FILE).
MAX_VARS_FILE = 4 << 20

# A sensitive value this short is not looked for in the other variables'
# values (see sensitive_closure).
MIN_DERIVED = 4

# Characters JSON leaves as they are that a YAML reader may take for line
# breaks or refuse (ral reads the file as YAML): written as escapes.
NOT_YAML_SAFE = re.compile('[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]')

# Texts that ral's templating renders (its engine::is_template).
TEMPLATE_MARKS = ('{{', '{%', '{#')


def variable_problem(name):
    """Why NAME cannot be one of ral's variables, or None."""
    if not isinstance(name, str) or not VARIABLE_NAME.match(name):
        return ("%r is not a variable name (letters, digits and '_', not starting with a "
                "digit)" % (name,))
    if name in RESERVED:
        return ("%r is a name every ral template has (%s); a variable cannot take it"
                % (name, ', '.join(RESERVED)))
    return None


def value_texts(value):
    """The texts of VALUE and of everything in it, as Ansible's no_log
    shows them (numbers as their text; not booleans or null)."""
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float)):
        return [str(value)]
    if isinstance(value, dict):
        value = list(value.values())
    found = []
    if isinstance(value, (list, tuple)):
        for item in value:
            found += value_texts(item)
    return found


def sensitive_closure(variables, sensitive):
    """The names in SENSITIVE, with every other variable of VARIABLES (a
    dict) whose value holds the text of a sensitive one of at least
    MIN_DERIVED characters: a value Ansible computed from a secret
    (dsn: "pg://app:{{ db_password }}@db") before ral sees it, which ral
    could not know comes from one."""
    names = set(sensitive)
    secrets = set()
    for name in names:
        if name in variables:
            secrets.update(t for t in value_texts(variables[name]) if len(t) >= MIN_DERIVED)
    if secrets:
        for name, value in variables.items():
            if name not in names and any(secret in text for text in value_texts(value)
                                         for secret in secrets):
                names.add(name)
    return names


def literal(value):
    """VALUE with every text that holds Jinja2 made an expression of
    itself ({{ "TEXT" }}): ral renders a variable whose value holds a
    template, and these values are final (Ansible rendered them, or they
    were unsafe: !unsafe, a command's output)."""
    if isinstance(value, str):
        if any(mark in value for mark in TEMPLATE_MARKS):
            return '{{ %s }}' % json.dumps(value, ensure_ascii=False)
        return value
    if isinstance(value, dict):
        return dict((key, literal(item)) for key, item in value.items())
    if isinstance(value, list):
        return [literal(item) for item in value]
    return value


def variables_text(variables, sensitive):
    """The variables file's text: one JSON mapping of VARIABLES (their
    texts made literal), with ral_sensitive listing SENSITIVE."""
    data = dict((name, literal(value)) for name, value in variables.items())
    data[SENSITIVE_LIST] = sorted(sensitive)
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, sort_keys=True)
    return NOT_YAML_SAFE.sub(lambda m: '\\u%04x' % ord(m.group()), text)


@contextlib.contextmanager
def variables_file(module, variables, sensitive):
    """A file that holds VARIABLES for ral -e @FILE (see variables_text),
    in a directory of its own that only its owner can enter (0700), the
    file 0600; both are removed when the block ends, however it ends (a
    fail_json in it too). Fails the module when the file would be larger
    than ral reads, naming the largest variables."""
    data = variables_text(variables, sensitive).encode('utf-8')
    if len(data) > MAX_VARS_FILE:
        sizes = sorted(((len(json.dumps(v)), n) for n, v in variables.items()), reverse=True)
        module.fail_json(
            msg='the variables take %d bytes, more than ral reads (%d); the largest: %s. Pass '
                'fewer (host_vars: false, and the ones the manifest uses as vars)'
                % (len(data), MAX_VARS_FILE,
                   ', '.join('%s (%d bytes)' % (n, size) for size, n in sizes[:5])))
    directory = tempfile.mkdtemp(prefix='ral-vars-', dir=module.tmpdir)
    try:
        path = os.path.join(directory, 'vars.json')
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
        yield path
    finally:
        shutil.rmtree(directory, ignore_errors=True)
