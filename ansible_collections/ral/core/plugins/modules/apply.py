#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright: ral contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: apply
short_description: Bring the managed host to a ral manifest (ral apply)
version_added: "0.1.0"
description:
  - Runs C(ral apply -j) on the managed host with a ral manifest, which declares many
    resources (users, groups, files, hosts entries, mounts, packages, services) with
    their dependencies; ral plans what differs and runs the tasks in dependency order,
    then verifies the result.
  - The manifest is a file on the managed host (O(manifest)) or given inline
    (O(content)), which the module writes to a temporary file on the managed host.
  - Returns the plan's id, each task with its resource, action, changes, state and
    error, and a diff per changed resource. The task fails when any of ral's tasks
    failed, was skipped or was stopped, and the failing ones are in RV(failed_tasks).
  - A manifest that ral refuses (an unknown type or attribute, a value that does not fit
    its type, a dependency cycle) fails the task with ral's message, and nothing runs.
  - The manifest's templates (C({{ app_port }}), C(when:), C(loop:), a file's C(template:))
    see the play's variables for the host, as with C(ral apply -i) they see the inventory's
    (see O(host_vars), O(vars) and O(sensitive_vars)). The module gives them to ral in a file
    of its own (C(ral apply -e @FILE)), which only the user the module runs as can read and
    which is removed when ral has ended, never on ral's command line.
  - ral remembers what it applied in a state store (by default
    C(ROOT/var/lib/ral/state.db)), and removes the resources it created that no manifest
    applied with that store lists any more. Two C(ral.core.apply) tasks with different
    manifests on one host therefore need different O(state) files, or
    O(keep_removed=true); otherwise each removes what the other created.
requirements:
  - C(ral) on the managed host, and what its providers need there (python3 for the
    bundled ones).
author:
  - ral maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details:
      - Check mode runs C(ral plan), which never changes anything (nor the state store),
        and reports the pending tasks as changes.
  diff_mode:
    support: full
    details:
      - One diff per changed resource, with the old and new values of the attributes
        that change.
  platform:
    platforms: posix
options:
  manifest:
    description:
      - The path of a manifest on the managed host (YAML, or JSON by the C(.json)
        extension).
      - Exactly one of O(manifest) and O(content) is required.
    type: path
  content:
    description:
      - The manifest itself, written to a temporary file on the managed host.
      - >-
        A string is taken as YAML text, which ral types by the providers' metadata (so
        C(mode: 0640) there stays the text C(0640)). A mapping is written as JSON; note
        that Ansible's YAML has already read unquoted values such as C(0640) as numbers
        then, so prefer a string (a block scalar, or a template lookup). In a mapping, an
        integer C(mode) fails the task, saying to quote it.
      - Exactly one of O(manifest) and O(content) is required.
      - A manifest may hold sensitive values (passwords), so the task's returned
        C(invocation) shows V(CONTENT_NOT_SHOWN) in its place; ral prints sensitive values
        as C([redacted]) in the tasks and diffs it reports.
    type: raw
  root:
    description:
      - The root directory the providers work below (C(ral apply --root),
        C(RALSH_ROOT_DIR)). The default is V(/).
    type: path
  include:
    description:
      - Extra data directories on the managed host whose C(providers/) are searched
        before the bundled providers (C(ral apply -I), in order).
    type: list
    elements: path
    default: []
  state:
    description:
      - The state store file on the managed host (C(ral apply --state FILE)). The default
        is C(ROOT/var/lib/ral/state.db).
      - This is ral's store of what it applied, not a desired state; the manifest says
        what is present or absent.
    type: path
    aliases: [state_file]
  keep_removed:
    description:
      - Plan no removals (C(ral apply --keep-removed)) of resources that an earlier run
        with the same state store applied and the manifest no longer lists.
    type: bool
    default: false
  host_vars:
    description:
      - Pass the host's variables to ral, for the manifest's templates.
      - >-
        These are the variables the task sees for the host (the inventory's, the group and host
        vars files', the play's, C(set_fact)'s and registered ones, C(-e)), each rendered as
        Ansible renders it (so every lookup in them runs), and passed as it is rendered: ral
        does not render them again. Left out are Ansible's own (C(hostvars), C(groups),
        C(omit), C(playbook_dir), C(inventory_dir), C(role_path), every C(ansible_*)
        connection, fact and play variable, ...), the names every ral template has and ral
        refuses as variables (C(facts), C(item)), and,
        without failing the task, a variable that does not render (it names an undefined
        one) or is not JSON data (at C(-vvv) the task names them).
      - >-
        The host's C(inventory_hostname) and C(group_names) are passed too (ral takes them
        from C(-e) only), so a manifest's C(when: "'web' in group_names") reads as under
        C(ral apply -i).
      - V(false) passes only O(vars).
      - The action plugin of the module reads this; the module itself takes its variables
        from O(vars).
    type: bool
    default: true
  vars:
    description:
      - Variables for the manifest's templates, above the host's (O(host_vars)), as
        C(ral apply -e) gives them.
      - Names are variable names (letters, digits and C(_), not starting with a digit), and
        not C(facts) or C(item).
      - A C(ral_sensitive) list among them names more sensitive variables, as
        O(sensitive_vars) does.
      - The values never show in the task's returned C(invocation) (which lists their names)
        nor in the managed host's log.
    type: dict
  sensitive_vars:
    description:
      - The names of the variables whose values are secrets. ral redacts every attribute
        whose value was computed from one (as V([redacted])) in the plan, its report and its
        state store, and the module hides their values (as C(no_log) values) in what the
        task returns.
      - >-
        Besides these, sensitive are the variables every C(ral_sensitive) list (a host
        variable, or in O(vars)) names, as with C(ral apply -i); every variable whose value
        Ansible decrypted from a vault (an inline C(!vault) value, or one read from a
        vault-encrypted vars file such as C(group_vars/all/vault.yml)); and every variable
        whose value holds the text (of 4 characters or more) of a sensitive one, as Ansible
        computed it (C(dsn: "pg://app:{{ vault_db_password }}@db")).
      - Ansible marks no other value as secret (a C(no_log) task hides its own output, not
        the variables it is given), so a secret that is neither vaulted nor computed from a
        vaulted one must be named here or in a C(ral_sensitive) list.
    type: list
    elements: str
    default: []
  ral_path:
    description:
      - The path of C(ral) on the managed host.
      - By default C(ral) is looked for on the C(PATH) (and in the sbin directories); the
        task fails naming the path when it is not there.
    type: path
notes:
  - The module runs C(ral apply -j), and C(ral plan -j) in check mode, without
    C(--detailed-exitcodes), and reads ral's exit status as 0 (every task succeeded or
    nothing was to be done), 1 (a task failed, was skipped or was stopped; for
    C(ral plan), a resource could not be read) and 2 (nothing ran).
  - Lines ral logs as warnings become the task's warnings.
  - The variables go to ral in a JSON file in a directory of the module's temporary directory
    on the managed host, made for it with mode 0700 (the file 0600) and removed when ral has
    ended, also when the task fails.
  - The variables are rendered on the controller by an action plugin (C(ral.core.apply) too),
    which Ansible runs in the module's place.
seealso:
  - module: ral.core.resource
"""

EXAMPLES = r"""
- name: Converge the site manifest shipped with the role
  ral.core.apply:
    manifest: /etc/ral/site.yaml

- name: An inline manifest
  ral.core.apply:
    content: |
      group:
        devs: {gid: 2000}
      user:
        carol: {uid: 1500, gid: 2000, shell: /bin/bash, groups: [devs]}
      host:
        db.internal: {ip: 10.0.0.5}
    state: /var/lib/ral/site.db
  register: site

- name: A manifest from a template
  ral.core.apply:
    content: "{{ lookup('ansible.builtin.template', 'site.yaml.j2') }}"
    state: /var/lib/ral/templated.db

# site.yaml on the managed host, as ral apply -i runs it too:
#   file:
#     /etc/app.conf:
#       content: "port = {{ app_port }}\npassword = {{ db_password }}\n"
#       mode: '0600'
#   service:
#     nginx: {ensure: running, when: "tier == 'web'"}
- name: A manifest templated with the host's variables (app_port, tier, db_password)
  ral.core.apply:
    manifest: /etc/ral/site.yaml
    sensitive_vars: [db_password]

- name: Only the variables given here
  ral.core.apply:
    manifest: /etc/ral/site.yaml
    host_vars: false
    vars:
      app_port: 8080
      tier: web
      db_password: "{{ vault_db_password }}"
    sensitive_vars: [db_password]
"""

RETURN = r"""
plan_id:
  description: The id of ral's plan (in the state store, for C(ral state show)).
  returned: when a plan was made
  type: str
  sample: 1795684179-911447-30290
plan_state:
  description: >-
    The plan's state: V(Successful) or V(Failed) after ral apply, V(Initial) in check
    mode.
  returned: when a plan was made
  type: str
  sample: Successful
tasks:
  description:
    - Every task of the plan, as C(ral apply -j) prints them (schemas/ral-plan.schema.json
      in ral's repository).
    - Each has its C(id), C(resource) (C(TYPE[NAME])), C(type), C(name), C(provider),
      C(action) (create, change, remove, unknown), C(changes) (C([{attr, is, was}])),
      C(requires) (task ids), C(state) (Initial, Running, Success, Failed, Skipped,
      Stopped), C(error) (C({kind, message}) or null) and C(seconds).
  returned: when a plan was made
  type: list
  elements: dict
  sample:
    - id: 1
      resource: host[db.internal]
      type: host
      name: db.internal
      provider: host::etc_hosts
      action: create
      changes:
        - {attr: ensure, is: present, was: absent}
        - {attr: ip, is: 10.0.0.5, was: null}
      requires: []
      state: Success
      error: null
      seconds: 0.15
      drifted: false
failed_tasks:
  description: The tasks that failed, were skipped or stopped, or could not be read.
  returned: when a plan was made
  type: list
  elements: dict
counts:
  description: >-
    How many resources are to be created, changed, removed, unknown and unchanged, and
    how many tasks succeeded, failed, were skipped and stopped.
  returned: when a plan was made
  type: dict
  sample: {create: 1, change: 0, remove: 0, unknown: 0, unchanged: 2, success: 1,
           failed: 0, skipped: 0, stopped: 0}
problems:
  description: >-
    The problems ral found in the manifest, each with C(file), C(line) and C(message)
    (an inline O(content) is named C(content)).
  returned: when ral refused the manifest
  type: list
  elements: dict
cmd:
  description: >-
    The ral command line that ran (its C(-e @FILE) names the variables file, removed since).
  returned: always
  type: list
  elements: str
"""

import contextlib
import json
import os
import tempfile

from ansible.module_utils.common.text.converters import to_bytes
from ansible_collections.ral.core.plugins.module_utils.ral import (
    SENSITIVE_LIST,
    Module,
    change_diff,
    common_args,
    ral_binary,
    run_json,
    sensitive_closure,
    value_texts,
    variable_problem,
    variables_file,
)

# What the returned invocation shows instead of an inline manifest.
CONTENT_NOT_SHOWN = 'CONTENT_NOT_SHOWN'

# What the returned invocation shows for each variable's value.
VALUE_NOT_SHOWN = 'VALUE_SPECIFIED_IN_NO_LOG_PARAMETER'

# Task states that count as failures: ral apply's exit status is 1 for them.
FAILED_STATES = ('Failed', 'Skipped', 'Stopped')


def integer_mode(content):
    """The first resource of a manifest mapping whose mode is an integer
    (YAML read an unquoted 0640 as 416), as (TYPE, NAME, VALUE), or None."""
    if not isinstance(content, dict):
        return None
    for type_name, resources in content.items():
        if not isinstance(resources, dict):
            continue
        for name, attributes in resources.items():
            mode = attributes.get('mode') if isinstance(attributes, dict) else None
            if isinstance(mode, int) and not isinstance(mode, bool):
                return type_name, name, mode
    return None


def write_content(module, content):
    """CONTENT in a temporary file on the managed host (in the module's own
    temporary directory, removed when the module ends): YAML text as it is,
    a mapping as JSON."""
    found = integer_mode(content)
    if found:
        module.fail_json(
            msg="content: %s[%s]: mode: the integer %d is not a mode: YAML reads an unquoted "
                "mode with a leading 0 (0640) as an octal number (416) and one without (640) "
                "as a decimal one. Quote it, as in mode: '0640', or give content as YAML text"
                % found)
    if isinstance(content, (dict, list)):
        suffix, data = '.json', json.dumps(content)
    elif isinstance(content, str):
        suffix, data = '.yaml', content
    else:
        module.fail_json(msg='content must be YAML text or a mapping, not %s'
                         % type(content).__name__)
    fd, path = tempfile.mkstemp(prefix='manifest-', suffix=suffix, dir=module.tmpdir)
    with os.fdopen(fd, 'wb') as f:
        f.write(to_bytes(data, errors='surrogate_or_strict'))
    return path


def checked_variables(module):
    """The vars option as ral takes it (its ral_sensitive list taken out)
    and the names of the sensitive variables (see sensitive_closure).
    Fails the module on a name ral refuses. The option is no_log, so far
    every value of it was hidden in what the module returns; from here
    on only the sensitive ones are, as Ansible hides no_log values."""
    variables = dict(module.params['vars'] or {})
    sensitive = set(module.params['sensitive_vars'] or [])
    if SENSITIVE_LIST in variables:
        listed = variables.pop(SENSITIVE_LIST)
        if isinstance(listed, str):
            listed = [listed]
        if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
            module.fail_json(msg='vars: %s: expected a list of variable names' % SENSITIVE_LIST)
        sensitive.update(listed)
    for name in variables:
        problem = variable_problem(name)
        if problem:
            module.fail_json(msg='vars: %s' % problem)
    sensitive = sensitive_closure(variables, sensitive)
    for name, value in variables.items():
        if name not in sensitive:
            module.no_log_values.difference_update(value_texts(value))
    for name in sensitive:
        if name in variables:
            module.no_log_values.update(value_texts(variables[name]))
    return variables, sensitive


def main():
    module = Module(
        argument_spec=dict(
            manifest=dict(type='path'),
            content=dict(type='raw'),
            root=dict(type='path'),
            include=dict(type='list', elements='path', default=[]),
            state=dict(type='path', aliases=['state_file']),
            keep_removed=dict(type='bool', default=False),
            host_vars=dict(type='bool', default=True),
            # no_log: until the module knows which are sensitive, every
            # value is hidden (a failure of the parameters shows none).
            vars=dict(type='dict', no_log=True),
            sensitive_vars=dict(type='list', elements='str', default=[]),
            ral_path=dict(type='path'),
        ),
        mutually_exclusive=[('manifest', 'content')],
        required_one_of=[('manifest', 'content')],
        supports_check_mode=True,
    )
    params = module.params
    # The returned invocation is made from the parameters when the module
    # exits: the manifest, which may hold secrets, is not in it.
    content = params['content']
    if content is not None:
        params['content'] = CONTENT_NOT_SHOWN
    variables, sensitive = checked_variables(module)
    # The variables' names, not their values.
    params['vars'] = dict((name, VALUE_NOT_SHOWN) for name in variables)
    ral = ral_binary(module, 'ral')
    cmd = [ral, 'plan' if module.check_mode else 'apply', '-j']
    cmd += common_args(module)
    if params['state']:
        cmd += ['--state', params['state']]
    if params['keep_removed']:
        cmd.append('--keep-removed')
    inline = None
    if content is not None:
        inline = write_content(module, content)
        manifest = inline
    else:
        manifest = params['manifest']
    module.log_invocation()

    given = None
    with contextlib.ExitStack() as stack:
        if variables or sensitive:
            given = stack.enter_context(variables_file(module, variables, sensitive))
            cmd += ['-e', '@' + given]
        cmd += ['--', manifest]
        rc, doc, err = run_json(module, cmd)
    # The variables file is gone.

    def named(text):
        """TEXT with the temporary file of an inline manifest called
        content, and the variables file vars."""
        if not isinstance(text, str):
            return text
        if inline:
            text = text.replace(inline, 'content')
        if given:
            text = text.replace(given, 'vars')
        return text

    if 'plan' not in doc:
        error = doc.get('error') or {}
        problems = error.get('problems') or []
        for problem in problems:
            problem['file'] = named(problem.get('file'))
            problem['message'] = named(problem.get('message'))
        module.fail_json(
            msg=named(error.get('message') or 'ral failed (exit status %d): %s' % (rc, err.strip())),
            problems=problems, cmd=cmd, rc=rc, stderr=named(err))

    plan = doc['plan']
    tasks = plan.get('tasks', [])
    failed_tasks = [t for t in tasks if t.get('state') in FAILED_STATES or t.get('error')]
    if module.check_mode:
        done = [t for t in tasks if t.get('action') != 'unknown']
    else:
        done = [t for t in tasks if t.get('state') == 'Success']
    outcome = dict(
        changed=bool(done),
        plan_id=plan.get('id'),
        plan_state=plan.get('state'),
        tasks=tasks,
        failed_tasks=failed_tasks,
        counts=plan.get('counts', {}),
        cmd=cmd,
    )
    if module._diff:
        diffs = []
        for task in done:
            before, after = change_diff(task.get('changes', []))
            diffs.append(dict(before_header=task['resource'], after_header=task['resource'],
                              before=before, after=after))
        outcome['diff'] = diffs
    if rc != 0 or failed_tasks:
        reasons = ['%s: %s' % (t['resource'], (t.get('error') or {}).get('message') or t['state'])
                   for t in failed_tasks]
        module.fail_json(
            msg='%s of %d tasks did not succeed: %s'
                % (len(failed_tasks), len(tasks), '; '.join(reasons) or 'ral exit status %d' % rc),
            rc=rc, stderr=named(err), **outcome)
    module.exit_json(**outcome)


if __name__ == '__main__':
    main()
