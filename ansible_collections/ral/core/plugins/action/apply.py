# -*- coding: utf-8 -*-

# Copyright: ral contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""The action plugin of ral.core.apply, which Ansible runs in the module's
place on the controller: it gives the module the play's variables for the
host, so that a manifest's templates (`{{ app_port }}`, `when:`, `loop:`)
see under Ansible what they see under `ral apply -i`.

Ansible modules see no variables; an action plugin sees them all
(task_vars). This one keeps the host's own (the inventory's, the play's,
set_fact's and registered ones), leaves out Ansible's own (`hostvars`,
`groups`, `ansible_*`, ...) and the names every ral template has
(`facts`, `item`, `inventory_hostname`, `group_names`, which ral refuses
as variables), renders each with the task's templar, and passes them to
the module as its `vars` option, under the task's own `vars`, with the
names of the sensitive ones as `sensitive_vars`: those the task names,
those every `ral_sensitive` list names, and every one whose value was
vault-encrypted (inline, or in a vault-encrypted vars file). The module
gives them to ral in a private file (`ral apply -e @FILE`)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence, Set

from ansible.errors import AnsibleError
from ansible.module_utils.common.validation import (
    check_type_bool,
    check_type_dict,
    check_type_list,
)
from ansible.parsing.vault import is_encrypted_file
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

try:  # ansible-core 2.19 and later
    from ansible.parsing.vault import VaultHelper
except ImportError:
    VaultHelper = None

try:  # where ansible-core 2.19 and later say a value was read from (internal)
    from ansible._internal._datatag._tags import Origin
except ImportError:
    Origin = None

display = Display()

MODULE = 'ral.core.apply'

# The variable whose list (in any source) names the sensitive variables.
SENSITIVE_LIST = 'ral_sensitive'

# Names every ral template has (ral's templating::RESERVED): ral refuses
# them as variables. Of those, inventory_hostname and group_names are
# passed apart (see HOST_NAMES): ral takes them from -e, so that a
# manifest's `when: "'web' in group_names"` reads as under `ral apply -i`.
RESERVED = frozenset(('facts', 'item', 'inventory_hostname', 'group_names'))

# The host's inventory name and groups, as Ansible gives them.
HOST_NAMES = ('inventory_hostname', 'group_names')

# Ansible's own variables ("special variables"), which are not the host's.
ANSIBLE_OWN = frozenset((
    'discovered_interpreter_python', 'environment', 'gather_subset', 'groups', 'hostvars',
    'inventory_dir', 'inventory_file', 'inventory_hostname_short', 'module_setup', 'omit',
    'play_hosts', 'playbook_dir', 'role_name', 'role_names', 'role_path', 'role_uuid', 'vars',
))

# Connection, fact and play variables: ansible_host, ansible_facts,
# ansible_check_mode, ansible_play_hosts...
ANSIBLE_PREFIX = 'ansible_'

# What a Jinja2 template (and ral's -e) can name.
VARIABLE_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*\Z')

# The deepest nesting of a value passed (ral reads no deeper).
MAX_DEPTH = 60


class NotData(ValueError):
    """A value that is not JSON data."""


def plain(value, depth=0):
    """VALUE as plain JSON data (dict, list, str, int, float, bool, None);
    raises NotData for anything else (bytes that are not UTF-8 text,
    objects, an infinite number, too deep a nesting)."""
    if depth > MAX_DEPTH:
        raise NotData('nested too deep')
    if value is None or isinstance(value, bool):
        return None if value is None else bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotData('not a finite number')
        return float(value)
    if getattr(value, '__ENCRYPTED__', False):
        # An inline vault value before ansible-core 2.19
        # (AnsibleVaultEncryptedUnicode): its text is the decrypted one.
        value = str(value)
    if isinstance(value, bytes):
        try:
            value = value.decode('utf-8')
        except UnicodeDecodeError:
            raise NotData('bytes that are not UTF-8 text')
    if isinstance(value, str):
        text = str(value)
        try:
            text.encode('utf-8')
        except UnicodeEncodeError:
            raise NotData('not UTF-8 text')
        return text
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if isinstance(key, bool) or key is None:
                key = 'true' if key else ('false' if key is False else 'null')
            elif isinstance(key, (int, float)):
                key = str(key)
            elif not isinstance(key, str):
                raise NotData('a key that is not a text')
            out[str(key)] = plain(item, depth + 1)
        return out
    if isinstance(value, (Sequence, Set)):
        return [plain(item, depth + 1) for item in value]
    raise NotData('not JSON data (%s)' % type(value).__name__)


class Vaulted(object):
    """Whether values were vault-encrypted: inline (an `!vault` value), or
    read from a vault-encrypted file (group_vars/all/vault.yml)."""

    def __init__(self):
        self.files = {}

    def encrypted_file(self, path):
        if not isinstance(path, str) or not path:
            return False
        if path not in self.files:
            try:
                with open(path, 'rb') as f:
                    self.files[path] = bool(is_encrypted_file(f))
            except (OSError, ValueError):
                self.files[path] = False
        return self.files[path]

    def origin(self, value):
        """The file VALUE was read from, when Ansible says."""
        if Origin is not None:
            try:
                tag = Origin.get_tag(value)
            except Exception:  # pylint: disable=broad-except
                tag = None
            if tag is not None:
                return getattr(tag, 'path', None)
        pos = getattr(value, 'ansible_pos', None)  # before ansible-core 2.19
        if isinstance(pos, tuple) and pos:
            return pos[0]
        return None

    def __call__(self, value, depth=0):
        """Whether VALUE, or anything in it, was vault-encrypted."""
        if depth > MAX_DEPTH:
            return False
        if getattr(value, '__ENCRYPTED__', False):  # AnsibleVaultEncryptedUnicode
            return True
        if VaultHelper is not None:
            try:
                if VaultHelper.get_ciphertext(value, with_tags=False):
                    return True
            except Exception:  # pylint: disable=broad-except
                pass
        if self.encrypted_file(self.origin(value)):
            return True
        if isinstance(value, Mapping):
            return any(self(item, depth + 1) for item in value.values())
        if isinstance(value, (list, tuple)):
            return any(self(item, depth + 1) for item in value)
        return False


def is_ansible_own(name):
    """Whether NAME is one of Ansible's own variables, not the host's."""
    return name in ANSIBLE_OWN or name.startswith(ANSIBLE_PREFIX)


def names_of(value, what):
    """The variable names of a ral_sensitive list (a list, or one name)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [str(value)]
    if isinstance(value, Sequence) and all(isinstance(n, str) for n in value):
        return [str(n) for n in value]
    raise AnsibleError('%s: expected a list of variable names' % what)


class ActionModule(ActionBase):

    _supports_check_mode = True
    _supports_async = True

    def host_variables(self, task_vars, vaulted):
        """The host's variables from TASK_VARS, rendered, as plain data;
        the names of the vault-encrypted ones; the names of those left
        out because they do not render or are not data; and the names
        their ral_sensitive lists give."""
        variables = {}
        sensitive = set()
        dropped = []
        listed = []
        for name in sorted(n for n in task_vars if isinstance(n, str)):
            if is_ansible_own(name) or name in RESERVED:
                continue
            if not VARIABLE_NAME.match(name):
                dropped.append(name)
                continue
            raw = task_vars[name]
            try:
                value = self._templar.template(raw)
            except Exception:  # pylint: disable=broad-except
                # Ansible renders a variable only where it is used; one that
                # does not render (it names an undefined one) is left out.
                dropped.append(name)
                continue
            if name == SENSITIVE_LIST:
                listed = names_of(value, 'the host variable ' + SENSITIVE_LIST)
                continue
            try:
                data = plain(value)
            except NotData:
                dropped.append(name)
                continue
            if vaulted(raw) or vaulted(value):
                sensitive.add(name)
            variables[name] = data
        return variables, sensitive, dropped, listed

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        task_vars = task_vars or {}
        args = dict(self._task.args)
        try:
            use_host_vars = check_type_bool(args.get('host_vars', True))
            explicit = args.get('vars')
            explicit = {} if explicit is None else check_type_dict(explicit)
            sensitive_vars = args.get('sensitive_vars')
            sensitive_vars = [] if sensitive_vars is None else check_type_list(sensitive_vars)
        except TypeError as e:
            result.update(failed=True, msg=str(e))
            return result

        vaulted = Vaulted()
        variables = {}
        sensitive = set(str(name) for name in sensitive_vars)
        if use_host_vars:
            try:
                variables, found, dropped, listed = self.host_variables(task_vars, vaulted)
            except AnsibleError as e:
                result.update(failed=True, msg=str(e))
                return result
            sensitive |= found
            sensitive.update(listed)
            for name in HOST_NAMES:
                if name in task_vars:
                    variables[name] = plain(self._templar.template(task_vars[name]))
            if dropped:
                display.vvv('%s: host variables not passed to ral (they do not render, or are '
                            'not JSON data, or not variable names): %s'
                            % (MODULE, ', '.join(dropped)), host=self._play_context.remote_addr)
        omit = task_vars.get('omit')
        for name, value in explicit.items():
            name = str(name)
            if omit is not None and isinstance(value, str) and value == omit:
                continue
            if name == SENSITIVE_LIST:
                try:
                    sensitive.update(names_of(value, 'vars: ' + SENSITIVE_LIST))
                except AnsibleError as e:
                    result.update(failed=True, msg=str(e))
                    return result
                continue
            if vaulted(value):
                sensitive.add(name)
            try:
                variables[name] = plain(value)
            except NotData as e:
                result.update(failed=True, msg='vars: %s: %s' % (name, e))
                return result

        # The module adds those whose values hold a sensitive one's text.
        display.vvv('%s: variables passed to ral: %s; sensitive: %s'
                    % (MODULE, ', '.join(sorted(variables)) or '(none)',
                       ', '.join(sorted(sensitive)) or '(none)'),
                    host=self._play_context.remote_addr)
        args['vars'] = variables
        args['sensitive_vars'] = sorted(sensitive)
        args['host_vars'] = use_host_vars

        wrap_async = self._task.async_val and not self._connection.has_native_async
        result.update(self._execute_module(module_name=MODULE, module_args=args,
                                           task_vars=task_vars, wrap_async=wrap_async))
        if not wrap_async:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result
