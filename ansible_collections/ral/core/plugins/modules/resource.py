#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright: ral contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: resource
short_description: Show, change or list resources through a ral provider (ralsh)
version_added: "0.1.0"
description:
  - Runs C(ralsh -j) on the managed host to bring one resource of a ral provider
    (hosts entries, users, groups, files, mounts, packages, services, or any provider
    in an O(include) directory) to the given O(attributes), and returns the resource
    as it is afterwards with the changes made.
  - ralsh compares the resource with O(attributes) and calls the provider only for the
    attributes that differ, so a second run with the same attributes changes nothing
    and reports C(changed=false).
  - With O(name) and no O(attributes), the resource is only read. Without O(name), every
    resource of O(type) is listed in RV(resources); a listing never changes anything.
  - Values are typed by the provider's metadata exactly as on ralsh's command line, and
    a value that does not fit its attribute's type, an unknown attribute or a read-only
    one is rejected with ralsh's message before anything runs.
requirements:
  - C(ralsh) (from ral) on the managed host, and what its providers need there
    (python3 for the bundled ones).
author:
  - ral maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details:
      - Check mode runs C(ralsh --noop), which never changes the system; the would-be
        changes are returned and reported as C(changed).
  diff_mode:
    support: full
    details:
      - The diff is the resource before (from the old values of the changes) and after.
  platform:
    platforms: posix
options:
  type:
    description:
      - The resource type (V(host), V(user), V(file), ...), or a qualified provider name
        (V(host::etc_hosts)) when a type has more than one suitable provider.
    type: str
    required: true
  name:
    description:
      - The resource's name.
      - When omitted, every resource of O(type) is listed in RV(resources) and nothing
        changes.
    type: str
  attributes:
    description:
      - The attributes to set, as a mapping of attribute name to value.
      - Each name must be a plain attribute name (letters, digits and C(_), not starting
        with a digit); any other name (one holding C(=), say) fails the task before
        anything runs.
      - Values are typed as in JSON and passed to ralsh on its standard input (C(ralsh
        --attrs-stdin)), never on its command line, which every user of the managed host
        can read; ralsh converts each to the type the provider declares. Strings pass as
        they are, booleans as V(true)/V(false), numbers in decimal, lists as JSON arrays,
        mappings as JSON objects, and null as the empty value (no value, for
        C(optional[...]) attributes).
      - >-
        An integer given for a mode (an attribute named C(mode), or whose type takes
        octal digits) fails the task: YAML reads an unquoted C(mode: 0640) as the number
        416 and C(mode: 640) as six hundred and forty. Quote it, as in C(mode: '0640').
      - V(ensure=absent) removes the resource; setting attributes of a resource that does
        not exist creates it.
      - Needs O(name). Without O(attributes) the resource is only read.
      - The values of the attributes the provider's metadata marks sensitive (passwords)
        are asked of ralsh first (C(ralsh -j --explain TYPE)) and kept out of everything
        the task returns, its C(invocation) included, as C(no_log) values are; when the
        metadata cannot be read, every value given is. ralsh itself prints them as
        C([redacted]).
    type: dict
  root:
    description:
      - The root directory the providers work below (C(ralsh --root), C(RALSH_ROOT_DIR)).
        The default is V(/).
    type: path
  include:
    description:
      - Extra data directories on the managed host whose C(providers/) are searched
        before the bundled providers (C(ralsh -I), in order).
    type: list
    elements: path
    default: []
  ral_path:
    description:
      - The path of C(ralsh) on the managed host.
      - By default C(ralsh) is looked for on the C(PATH) (and in the sbin directories);
        the task fails naming the path when it is not there.
    type: path
notes:
  - Errors of ralsh (exit status 2) fail the task with ralsh's message in C(msg).
  - Lines ralsh logs as warnings become the task's warnings.
seealso:
  - module: ral.core.apply
"""

EXAMPLES = r"""
- name: A hosts entry
  ral.core.resource:
    type: host
    name: db.internal
    attributes:
      ip: 10.0.0.5
      host_aliases: [db]

- name: A user with its groups
  ral.core.resource:
    type: user
    name: carol
    attributes:
      uid: 1500
      shell: /bin/bash
      groups: [wheel, devs]

- name: Remove a hosts entry
  ral.core.resource:
    type: host
    name: old.internal
    attributes:
      ensure: absent

- name: Read one resource
  ral.core.resource:
    type: user
    name: root
  register: root_user

- name: List all hosts entries
  ral.core.resource:
    type: host
  register: hosts

- name: A provider of your own, with ralsh installed elsewhere
  ral.core.resource:
    type: setting
    name: color
    attributes:
      value: dark blue
    include: [/opt/site-ral]
    ral_path: /opt/ral/bin/ralsh
"""

RETURN = r"""
resource:
  description:
    - The resource as it is after the change (in check mode, as it would be), as
      C(ralsh -j) prints it, with a C(ral) member naming its type and provider.
    - Without O(attributes), the resource as found, or null when the provider does not
      know it (providers with an C(ensure) attribute mostly report unknown names as
      C(ensure=absent) instead).
  returned: when O(name) is given
  type: dict
  sample:
    name: db.internal
    ensure: present
    ip: 10.0.0.5
    host_aliases: [db]
    ral:
      type: host
      provider: host::etc_hosts
changes:
  description:
    - The changes made (in check mode, that would be made), one per attribute, with its
      new value C(is) and its old value C(was) (null when it had none). Empty when
      nothing changed.
  returned: when O(attributes) is given
  type: list
  elements: dict
  sample:
    - attr: ensure
      is: present
      was: absent
    - attr: ip
      is: 10.0.0.5
      was: null
resources:
  description: Every resource of O(type), as C(ralsh -j TYPE) lists them.
  returned: when O(name) is omitted
  type: list
  elements: dict
cmd:
  description: The ralsh command line that ran (the attributes' values went on its
    standard input, not here).
  returned: always
  type: list
  elements: str
"""

import json
import re

from ansible_collections.ral.core.plugins.module_utils.ral import (
    NOT_LOGGED,
    Module,
    change_diff,
    common_args,
    ral_binary,
    run_json,
)


def command_line_value(value):
    """VALUE (typed as in JSON) as ralsh's command line takes it."""
    if value is None:
        return ''
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (list, dict, int, float)):
        return json.dumps(value)
    return str(value)


# A plain attribute name, as ral's metadata declares them.
ATTRIBUTE_NAME = re.compile(r'\A[A-Za-z_][A-Za-z0-9_]*\Z')


def texts(value):
    """Every text VALUE could show up as: its command-line text, and those
    of its elements and members."""
    found = [command_line_value(value)]
    if isinstance(value, list):
        for item in value:
            found += texts(item)
    elif isinstance(value, dict):
        for item in value.values():
            found += texts(item)
    return [text for text in found if text]


def declared_attributes(module):
    """The attributes the provider of the type declares, by name, asked of
    ralsh; None when it cannot say."""
    cmd = [ral_binary(module, 'ralsh'), '-j', '--explain'] + common_args(module)
    cmd += ['--', module.params['type']]
    rc, out, err = module.run_command(cmd)
    try:
        declared = json.loads(out)['providers'][0]['attributes']
        return dict((a['name'], a) for a in declared)
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def sensitive_attributes(declared, attributes):
    """The attributes among ATTRIBUTES that the provider's metadata marks
    sensitive; all of them when it cannot say."""
    if declared is None:
        return set(attributes)
    return set(attr for attr in attributes
               if attr in declared and declared[attr].get('sensitive'))


# A type that takes octal digits only, as file modes do (also inside
# optional[...] or variant[...]).
OCTAL_PATTERN = re.compile(r'pattern\[/\^?\[0-7\]')


def integer_mode_error(declared, attributes):
    """Why an integer given for a mode is refused, or None. YAML reads an
    unquoted 0640 as the octal number 0640 (416) and 640 as six hundred
    and forty: neither reaches ral as the digits written, so a mode must
    be a quoted string."""
    for attr, value in attributes.items():
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        kind = ((declared or {}).get(attr) or {}).get('type', '')
        if attr == 'mode' or OCTAL_PATTERN.search(kind):
            return ("attributes: %s: the integer %d is not a mode: YAML reads an unquoted "
                    "mode with a leading 0 (0640) as an octal number (416) and one without "
                    "(640) as a decimal one. Quote it, as in %s: '0640'" % (attr, value, attr))
    return None


def error_message(doc, rc, err):
    error = doc.get('error')
    if isinstance(error, dict) and error.get('message'):
        return error['message']
    return 'ralsh failed (exit status %d): %s' % (rc, err.strip())


def main():
    module = Module(
        argument_spec=dict(
            type=dict(type='str', required=True),
            name=dict(type='str'),
            attributes=dict(type='dict'),
            root=dict(type='path'),
            include=dict(type='list', elements='path', default=[]),
            ral_path=dict(type='path'),
        ),
        required_by=dict(attributes='name'),
        supports_check_mode=True,
    )
    params = module.params
    changing = params['attributes'] is not None and params['name'] is not None
    stdin = None
    if not changing:
        module.log_invocation()
    if changing:
        attributes = params['attributes']
        for attr in attributes:
            if not isinstance(attr, str) or not ATTRIBUTE_NAME.match(attr):
                module.fail_json(
                    msg="attributes: %r is not an attribute name (letters, digits and '_', "
                        "not starting with a digit)" % (attr,))
        declared = declared_attributes(module)
        refused = integer_mode_error(declared, attributes)
        if refused:
            module.fail_json(msg=refused)
        sensitive = sensitive_attributes(declared, attributes)
        for attr in sensitive:
            for text in texts(attributes[attr]):
                module.no_log_values.add(text)
        module.log_invocation(hidden=dict(attributes=dict(
            (attr, NOT_LOGGED if attr in sensitive else value)
            for attr, value in attributes.items())))
        stdin = json.dumps(dict((attr, command_line_value(value))
                                for attr, value in attributes.items()))
    cmd = [ral_binary(module, 'ralsh'), '-j']
    if changing and module.check_mode:
        cmd.append('-n')
    cmd += common_args(module)
    if changing:
        cmd.append('--attrs-stdin')
    cmd += ['--', params['type']]
    if params['name'] is not None:
        cmd.append(params['name'])

    rc, doc, err = run_json(module, cmd, data=stdin)
    if 'error' in doc and 'resources' not in doc:
        module.fail_json(msg=error_message(doc, rc, err), cmd=cmd, rc=rc, stderr=err)

    if params['name'] is None:
        if 'error' in doc or rc != 0:
            module.fail_json(msg=error_message(doc, rc, err), cmd=cmd, rc=rc, stderr=err,
                             resources=doc.get('resources', []))
        module.exit_json(changed=False, resources=doc.get('resources', []), cmd=cmd)

    if not changing:
        # {"resource": ...}, or {} with exit status 1 when not found.
        if rc not in (0, 1):
            module.fail_json(msg=error_message(doc, rc, err), cmd=cmd, rc=rc, stderr=err)
        module.exit_json(changed=False, resource=doc.get('resource'), cmd=cmd)

    results = doc.get('result')
    if rc != 0 or not isinstance(results, list) or len(results) != 1:
        module.fail_json(msg=error_message(doc, rc, err), cmd=cmd, rc=rc, stderr=err)
    result = results[0]
    if 'error' in result:
        module.fail_json(msg=error_message(result, rc, err), cmd=cmd, rc=rc, stderr=err)
    resource = result['resource']
    changes = result['changes']
    outcome = dict(changed=bool(changes), resource=resource, changes=changes, cmd=cmd)
    if module._diff:
        after = dict((k, v) for k, v in resource.items() if k != 'ral')
        before, after = change_diff(changes, after, after)
        outcome['diff'] = dict(before=before, after=after)
    module.exit_json(**outcome)


if __name__ == '__main__':
    main()
