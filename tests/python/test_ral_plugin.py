"""Unit tests of the plugin side of the model-plugin protocol
(providers/ral_provider/plugin.py) and of the bundled webapp plugin
(plugins/webapp.plugin): JSON documents in, JSON documents out, no ral
host needed. Run as python3 -I -S this file."""

import contextlib
import http.server
import importlib.machinery
import importlib.util
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(TOP, "providers"))
import ral_provider as ral  # noqa: E402
from ral_provider import plugin  # noqa: E402

WEBAPP = os.path.join(TOP, "plugins", "webapp.plugin")


def load_webapp():
    """The webapp plugin as a module (its name has no .py)."""
    loader = importlib.machinery.SourceFileLoader("webapp_plugin", WEBAPP)
    spec = importlib.util.spec_from_loader("webapp_plugin", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


webapp = load_webapp()


def item(vpath, state="Initial", properties=None, applied=None):
    _, type_, name = vpath.split("/", 2)
    return {"vpath": vpath, "type": type_, "name": name, "state": state,
            "properties": properties or {}, "applied_properties": applied}


def document(*items, root="/", target=None, noop=False, **extra):
    doc = {"ral": {"root": root, "target": target, "noop": noop},
           "model": {"items": list(items)}}
    doc.update(extra)
    return doc


def api_of(*items, **ral_section):
    return plugin.api_from_input(document(*items, **ral_section),
                                 "create_configuration")


def call(action, stdin, argv=None, **functions):
    """(exit status, stdout text, stderr text) of plugin.run with STDIN
    (a document, or bytes as they are) for ACTION."""
    data = stdin if isinstance(stdin, bytes) else json.dumps(stdin).encode()
    saved = sys.stdin, sys.stdout
    sys.stdin = io.TextIOWrapper(io.BytesIO(data))
    sys.stdout = io.StringIO()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            status = plugin.run(
                argv=argv if argv is not None else ["ral_action=" + action],
                **functions)
        out = sys.stdout.getvalue()
    finally:
        sys.stdin, sys.stdout = saved
    return status, out, err.getvalue()


def one_document(test, out):
    """The single JSON document of OUT (a second one fails the test)."""
    test.assertTrue(out.endswith("\n"))
    test.assertEqual(out.count("\n"), 1, out)
    return json.loads(out)


# ------------------------------------------------------------- protocol


class Dispatch(unittest.TestCase):
    def test_each_action_reaches_its_function_and_answers_once(self):
        seen = []

        def validate(api):
            seen.append(("validate", [i.vpath for i in api.query("webapp")]))
            return [ral.ValidationError("/webapp/a", "bad port", "port")]

        def configure(api):
            seen.append(("configure", api.root, api.noop, api.target))
            return [ral.RemoteTask("/webapp/a", ["true"])]

        doc = document(item("/webapp/a"), root="/srv/r", noop=True)
        status, out, _ = call("validate_model", doc, validate_model=validate,
                              create_configuration=configure)
        self.assertEqual(status, 0)
        self.assertEqual(one_document(self, out), {"errors": [
            {"vpath": "/webapp/a", "property": "port", "message": "bad port"}]})
        status, out, _ = call("create_configuration", doc,
                              validate_model=validate,
                              create_configuration=configure)
        self.assertEqual(status, 0)
        self.assertEqual(one_document(self, out), {"tasks": [
            {"kind": "remote", "item": "/webapp/a", "id": "t1",
             "command": ["true"], "requires": [], "description": "run true"}]})
        self.assertEqual(seen, [("validate", ["/webapp/a"]),
                                ("configure", "/srv/r", True, None)])

    def test_a_validation_error_without_property_leaves_it_out(self):
        status, out, _ = call("validate_model", document(),
                              validate_model=lambda api: [
                                  ral.ValidationError("/x/y", "whole item")])
        self.assertEqual(json.loads(out),
                         {"errors": [{"vpath": "/x/y", "message": "whole item"}]})

    def test_update_model_answers_updates(self):
        def update(api):
            return [ral.Update(api.query_by_vpath("/webapp/a"), {"port": 9})]
        status, out, _ = call("update_model", document(item("/webapp/a")),
                              update_model=update)
        self.assertEqual((status, json.loads(out)), (0, {"updates": [
            {"vpath": "/webapp/a", "properties": {"port": 9}}]}))
        status, out, _ = call("update_model", document(),
                              update_model=lambda api: {"/webapp/b": {"x": 1}})
        self.assertEqual(json.loads(out), {"updates": [
            {"vpath": "/webapp/b", "properties": {"x": 1}}]})

    def test_wrong_calls_get_the_error_document_and_exit_1(self):
        configure = {"create_configuration": lambda api: []}
        cases = [
            (["ral_action=validate_model"], document(),
             "unknown action 'validate_model': this plugin offers "
             "create_configuration"),
            ([], document(), "expected exactly one argument ral_action=ACTION, "
             "got none"),
            (["ral_action=create_configuration", "x=y"], document(),
             "expected exactly one argument"),
            (None, b"{not json", "stdin is not a JSON document"),
            (None, b"[1, 2]", "stdin must be a JSON object, not an array"),
            (None, b"\xff\xfe{}", "stdin is not UTF-8"),
            (None, b"[" * 100000, "stdin is not a JSON document"),
            (None, {"ral": {}}, "missing key 'model' in the input"),
            (None, {"ral": {"noop": "yes"}, "model": {"items": []}},
             "'ral.noop' must be a boolean"),
            (None, {"model": {"items": [item("/webapp/a", state="Done")]}},
             "model.items[0]: state 'Done' is not one of Initial, Applied, "
             "Updated, ForRemoval"),
            (None, {"model": {"items": [item("/a/b"), item("/a/b")]}},
             "vpath '/a/b' is given twice"),
            (None, {"model": {"items": [{"vpath": 1}]}},
             "model.items[0]: 'vpath' must be a string"),
        ]
        for argv, stdin, message in cases:
            with self.subTest(argv=argv, message=message):
                status, out, _ = call("create_configuration", stdin,
                                      argv=argv, **configure)
                self.assertEqual(status, 1)
                answer = one_document(self, out)
                self.assertEqual(list(answer), ["error"])
                self.assertIn(message, answer["error"]["message"])

    def test_an_exception_becomes_an_error_and_its_trace_goes_to_stderr(self):
        def buggy(api):
            print("stray output")
            return {}["port"]
        status, out, err = call("create_configuration", document(),
                                create_configuration=buggy)
        self.assertEqual(status, 1)
        self.assertEqual(one_document(self, out), {"error": {
            "message": "internal error in create_configuration: "
                       "KeyError: 'port'"}})
        self.assertNotIn("Traceback", out)
        self.assertIn("debug: Traceback (most recent call last):", err)
        # What the author printed did not break the one document.
        self.assertIn("stray output", err)

    def test_a_plugin_error_is_shown_as_it_is(self):
        def refuse(api):
            raise ral.PluginError("the shop is closed")
        status, out, err = call("create_configuration", document(),
                                create_configuration=refuse)
        self.assertEqual((status, json.loads(out)),
                         (1, {"error": {"message": "the shop is closed"}}))
        self.assertNotIn("Traceback", err)

    def test_what_an_author_returns_wrongly_is_an_error(self):
        status, out, _ = call("create_configuration", document(),
                              create_configuration=lambda api: "t1")
        self.assertEqual(status, 1)
        self.assertIn("must return a list", json.loads(out)["error"]["message"])
        status, out, _ = call("validate_model", document(),
                              validate_model=lambda api: ["bad"])
        self.assertEqual(status, 1)
        self.assertIn("returns ValidationErrors",
                      json.loads(out)["error"]["message"])


class Bounds(unittest.TestCase):
    def setUp(self):
        self.saved = plugin.INPUT_MAX

    def tearDown(self):
        plugin.INPUT_MAX = self.saved

    def test_input_longer_than_the_bound_is_refused_unread(self):
        data = json.dumps(document()).encode()
        configure = {"create_configuration": lambda api: []}
        plugin.INPUT_MAX = len(data)
        status, out, _ = call("create_configuration", data, **configure)
        self.assertEqual((status, json.loads(out)), (0, {"tasks": []}))
        plugin.INPUT_MAX = len(data) - 1
        status, out, _ = call("create_configuration", data, **configure)
        self.assertEqual(status, 1)
        self.assertEqual(json.loads(out)["error"]["message"],
                         "the input is longer than the %d bytes a plugin "
                         "reads" % (len(data) - 1))

    def test_read_input_reads_no_more_than_one_byte_past_the_bound(self):
        class Counting(io.BytesIO):
            asked = []

            def read(self, size=-1):
                self.asked.append(size)
                return io.BytesIO.read(self, size)
        stream = Counting(b"{}" + b" " * 100)
        with self.assertRaises(ral.CallError):
            plugin.read_input(stream, limit=10)
        self.assertEqual(stream.asked, [11])


# ---------------------------------------------------------------- model


class Models(unittest.TestCase):
    def setUp(self):
        self.api = api_of(
            item("/webapp/a", "Initial", {"port": 8080, "owner": "a"}),
            item("/webapp/b", "Applied", {"port": 8081, "owner": "a"},
                 {"port": 8081, "owner": "a"}),
            item("/webapp/c", "Updated", {"port": 8082, "owner": "c"},
                 {"port": 9000, "owner": "c"}),
            item("/webapp/d", "ForRemoval", None, {"port": 8083}),
            item("/user/a", "Initial", {"ensure": "present"}))

    def test_query_by_type_and_properties(self):
        vpaths = lambda items: [i.vpath for i in items]  # noqa: E731
        self.assertEqual(vpaths(self.api.query("webapp")),
                         ["/webapp/a", "/webapp/b", "/webapp/c", "/webapp/d"])
        self.assertEqual(vpaths(self.api.query("webapp", owner="a")),
                         ["/webapp/a", "/webapp/b"])
        self.assertEqual(vpaths(self.api.query("webapp", owner="a",
                                               port=8081)), ["/webapp/b"])
        self.assertEqual(self.api.query("webapp", owner="nobody"), [])
        self.assertEqual(self.api.query("package"), [])
        self.assertEqual(vpaths(self.api.query("user")), ["/user/a"])

    def test_query_by_vpath_and_states(self):
        a, b, c, d = (self.api.query_by_vpath("/webapp/" + n) for n in "abcd")
        self.assertIsNone(self.api.query_by_vpath("/webapp/z"))
        self.assertEqual((a.type, a.name, a.state), ("webapp", "a", "Initial"))
        self.assertEqual([(i.is_initial(), i.is_applied(), i.is_updated(),
                           i.is_for_removal()) for i in (a, b, c, d)],
                         [(True, False, False, False),
                          (False, True, False, False),
                          (False, False, True, False),
                          (False, False, False, True)])
        self.assertIsNone(a.applied_properties)
        self.assertEqual(c.applied_properties, {"port": 9000, "owner": "c"})
        self.assertEqual(d.properties, {})
        self.assertEqual(c.port, 8082)
        with self.assertRaises(AttributeError):
            c.message

    def test_items_are_read_only(self):
        a = self.api.query_by_vpath("/webapp/a")
        with self.assertRaises(AttributeError):
            a.state = "Applied"
        with self.assertRaises(TypeError):
            a.properties["port"] = 1
        with self.assertRaises(TypeError):
            a.properties.update(port=1)
        self.assertEqual(a.properties["port"], 8080)

    def test_api_path_is_below_the_root(self):
        self.assertEqual(api_of(root="/srv/r").path("/etc/x"), "/srv/r/etc/x")
        self.assertEqual(api_of().path("/etc/x"), "/etc/x")


# ---------------------------------------------------------------- tasks


class Tasks(unittest.TestCase):
    def test_ids_are_unique_and_requires_become_ids_and_references(self):
        a = plugin.Item("/webapp/a", "webapp", "a", "Initial", {}, None)
        user = ral.ConfigTask(a, "user", "a", {"ensure": "present"})
        given = ral.ConfigTask(a, "file", "/etc/a", {"ensure": "file"},
                               id="t2")
        check = ral.CallbackTask(a, "check", 8080, requires=user, wait=1)
        later = ral.RemoteTask(a, ["restart"], id="custom")
        conf = ral.ConfigTask(
            a, "file", "/etc/a.conf", {"content": "x"},
            description="the config",
            requires=[user, later, "/user/a", "file[/etc]", ("user", "b"),
                      a, user, "t2"],
            replaces=[("file", "/etc/a.ini")])
        tasks = plugin.tasks_json([user, given, check, later, conf],
                                  callbacks={"check"})
        self.assertEqual([t["id"] for t in tasks],
                         ["t1", "t2", "t3", "custom", "t4"])
        self.assertEqual(tasks[2], {
            "kind": "callback", "item": "/webapp/a", "id": "t3",
            "callback": "check", "args": [8080], "kwargs": {"wait": 1},
            "requires": ["t1"], "description": "callback check"})
        self.assertEqual(tasks[4], {
            "kind": "config", "item": "/webapp/a", "id": "t4", "type": "file",
            "title": "/etc/a.conf", "attributes": {"content": "x"},
            "requires": ["t1", "custom", "/user/a", "file[/etc]", "user[b]",
                         "/webapp/a", "t2"],
            "replaces": [["file", "/etc/a.ini"]],
            "description": "the config"})
        self.assertEqual(list(tasks[4]), ["kind", "item", "id", "type",
                                          "title", "attributes", "requires",
                                          "replaces", "description"])

    def test_a_config_task_notifies_and_subscribes_as_it_requires(self):
        a = plugin.Item("/webapp/a", "webapp", "a", "Initial", {}, None)
        service = ral.ConfigTask(a, "service", "web", {"ensure": "running"})
        conf = ral.ConfigTask(a, "file", "/etc/web.conf", {"content": "x"},
                              notify=service, subscribe=("user", "a"))
        plain = ral.ConfigTask(a, "file", "/etc/other", {})
        tasks = plugin.tasks_json([service, conf, plain], callbacks=set())
        self.assertEqual(tasks[1]["notify"], ["t1"])
        self.assertEqual(tasks[1]["subscribe"], ["user[a]"])
        # Left out when unused, as before refresh edges.
        self.assertNotIn("notify", tasks[2])
        self.assertNotIn("subscribe", tasks[2])

    def test_wrong_references_are_refused_where_they_are_made(self):
        other = ral.RemoteTask("/a/b", ["true"])
        cases = [
            ([ral.RemoteTask("/a/b", ["x"], requires=other)],
             "which is not in the answer"),
            ([ral.RemoteTask("/a/b", ["x"], requires="restart")],
             "requires 'restart', which is no task id"),
            ([ral.RemoteTask("/a/b", ["x"], id="t1"),
              ral.RemoteTask("/a/b", ["y"], id="t1")],
             "task id 't1' is given to more than one task"),
            ([ral.RemoteTask("/a/b", ["x"], id="me", requires="me")],
             "task me requires itself"),
            ([other, other], "is in the answer twice"),
            ([ral.CallbackTask("/a/b", "chek")],
             "names 'chek', which is not among the callbacks given to "
             "run() (check)"),
        ]
        for tasks, message in cases:
            with self.subTest(message=message):
                with self.assertRaises(ValueError) as caught:
                    plugin.tasks_json(tasks, callbacks={"check"})
                self.assertIn(message, str(caught.exception))

    def test_builders_refuse_what_the_protocol_cannot_carry(self):
        with self.assertRaises(TypeError):
            ral.RemoteTask("/a/b", "echo hi")      # a shell line, not argv
        with self.assertRaises(TypeError):
            ral.ConfigTask("/a/b", "file", "", {})
        with self.assertRaises(TypeError):
            ral.ConfigTask("a/b", "file", "/x", {})  # not a vpath
        with self.assertRaises(TypeError):
            ral.ConfigTask("/a/b", "file", "/x", {}, replaces=["file"])
        for bad in ("", "/a/b", "file[/x]", 3):
            with self.assertRaises(TypeError):
                ral.RemoteTask("/a/b", ["x"], id=bad)

    def test_ordered_lists_nest_their_tasks_and_are_required_whole(self):
        first = ral.RemoteTask("/a/b", ["one"])
        second = ral.RemoteTask("/a/b", ["two"])
        ordered = ral.OrderedTasks("/a/b", [first, second])
        after = ral.CallbackTask("/a/b", "done", requires=ordered)
        tasks = plugin.tasks_json([ordered, after])
        self.assertEqual(tasks[0], {
            "kind": "ordered", "item": "/a/b", "tasks": [
                {"kind": "remote", "item": "/a/b", "id": "t1",
                 "command": ["one"], "requires": [], "description": "run one"},
                {"kind": "remote", "item": "/a/b", "id": "t2",
                 "command": ["two"], "requires": [],
                 "description": "run two"}]})
        self.assertEqual(tasks[1]["id"], "t3")
        self.assertEqual(tasks[1]["requires"], ["t1", "t2"])

    def test_lock_tasks_answer_a_pair(self):
        def lock(api):
            self.assertEqual(api.node, {"name": "web1", "zone": "a"})
            return (ral.RemoteTask(None, ["lock", api.node["name"]]),
                    ral.RemoteTask(None, ["unlock", api.node["name"]]))
        status, out, _ = call("create_lock_tasks",
                              document(node={"name": "web1", "zone": "a"}),
                              create_lock_tasks=lock)
        answer = json.loads(out)
        self.assertEqual(status, 0)
        self.assertEqual(answer["lock"]["command"], ["lock", "web1"])
        self.assertEqual(answer["unlock"]["id"], "t2")
        self.assertIsNone(answer["lock"]["item"])
        status, out, _ = call("create_lock_tasks", document(),
                              create_lock_tasks=lock)
        self.assertEqual(status, 1)
        self.assertIn("needs 'node'", json.loads(out)["error"]["message"])

    def test_snapshot_plans_see_the_snapshot_and_its_model(self):
        def plan(api):
            restored = api.snapshot_model.query_by_vpath("/webapp/a")
            return [ral.RemoteTask(None, [api.snapshot_action,
                                          api.snapshot_name,
                                          str(restored.properties["port"])])]
        doc = document(snapshot={"action": "restore", "name": "before"},
                       snapshot_model={"items": [item("/webapp/a", "Applied",
                                                      {"port": 81})]})
        status, out, _ = call("create_snapshot_plan", doc,
                              create_snapshot_plan=plan)
        self.assertEqual(json.loads(out)["tasks"][0]["command"],
                         ["restore", "before", "81"])


class Callbacks(unittest.TestCase):
    def test_a_callback_gets_the_api_args_and_kwargs(self):
        seen = []

        def check(api, port, message=None):
            seen.append((api.root, api.target, api.noop, port, message,
                         api.query_by_vpath("/webapp/a").state))
        doc = document(item("/webapp/a"), root="/r", target="web1",
                       callback="check", args=[8080],
                       kwargs={"message": "hi"})
        status, out, _ = call("callback", doc, callbacks=[check])
        self.assertEqual((status, json.loads(out)), (0, {}))
        self.assertEqual(seen, [("/r", "web1", False, 8080, "hi", "Initial")])

    def test_noop_reaches_the_toolkit_as_the_calls_noop(self):
        seen = []

        def check(api):
            seen.append((api.noop, ral.noop(), ral.Commands().noop))
        for noop in (True, False):
            call("callback", document(callback="check", noop=noop),
                 callbacks=[check])
        self.assertEqual(seen, [(True, True, True), (False, False, False)])

    def test_a_callback_task_without_its_callback_is_refused(self):
        status, out, _ = call("create_configuration", document(),
                              create_configuration=lambda api: [
                                  ral.CallbackTask("/a/b", "check")])
        self.assertEqual(status, 1)
        self.assertIn("names 'check', which is not among the callbacks "
                      "given to run() (none)",
                      json.loads(out)["error"]["message"])

    def test_a_failing_or_unknown_callback_fails_the_call(self):
        def check(api):
            raise ral.PluginError("nothing answers")
        status, out, _ = call("callback", document(callback="check"),
                              callbacks={"check": check})
        self.assertEqual((status, json.loads(out)),
                         (1, {"error": {"message": "nothing answers"}}))
        status, out, _ = call("callback", document(callback="other"),
                              callbacks={"check": check})
        self.assertEqual(status, 1)
        self.assertEqual(json.loads(out)["error"]["message"],
                         "unknown callback 'other': this plugin has check")


# --------------------------------------------------------------- webapp


SHOP = {"port": 8080, "owner": "shop", "message": "open"}


def tasks_of(*items, **ral_section):
    return plugin.tasks_json(webapp.create_configuration(api_of(
        *items, **ral_section)), callbacks={"check_answers"})


def short(tasks):
    """(id, kind, type[title] or callback or command, requires)."""
    out = []
    for task in tasks:
        what = {"config": lambda t: "%s[%s]" % (t["type"], t["title"]),
                "callback": lambda t: t["callback"],
                "remote": lambda t: " ".join(t["command"])}[task["kind"]](task)
        out.append((task["id"], what, task["requires"]))
    return out


class WebappConfiguration(unittest.TestCase):
    def test_an_initial_item_expands_to_its_whole_stack_in_order(self):
        tasks = tasks_of(item("/webapp/shop", "Initial", SHOP))
        self.assertEqual(short(tasks), [
            ("t1", "user[shop]", []),
            ("t2", "file[/etc/webapp]", []),
            ("t3", "file[/etc/webapp/shop.conf]", ["t2"]),
            ("t4", "file[/etc/init.d/webapp-shop]", []),
            ("t5", "service[webapp-shop]", ["t3", "t4", "t1"]),
            ("t6", "check_answers", ["t5"])])
        self.assertTrue(all(t["item"] == "/webapp/shop" for t in tasks))
        self.assertEqual(tasks[0]["attributes"], {
            "ensure": "present", "comment": "webapp service account",
            "home": "/nonexistent", "shell": "/usr/sbin/nologin"})
        conf = tasks[2]["attributes"]
        self.assertEqual((conf["ensure"], conf["mode"]), ("file", "0644"))
        self.assertEqual(json.loads(conf["content"]), {
            "name": "shop", "port": 8080, "owner": "shop", "message": "open"})
        script = tasks[3]["attributes"]
        self.assertEqual((script["ensure"], script["mode"]), ("file", "0755"))
        self.assertIn("# Default-Start:     2 3 4 5", script["content"])
        self.assertIn("NAME = 'shop'", script["content"])
        self.assertEqual(tasks[4]["attributes"],
                         {"ensure": "running", "enable": True})
        self.assertEqual((tasks[5]["args"], tasks[5]["kwargs"]),
                         ([8080], {"message": "open", "wait": 5.0}))

    def test_an_applied_item_gets_no_tasks(self):
        self.assertEqual(tasks_of(item("/webapp/shop", "Applied", SHOP, SHOP)),
                         [])

    def test_an_updated_item_is_restarted_before_it_is_checked(self):
        old = dict(SHOP, port=8000)
        tasks = tasks_of(item("/webapp/shop", "Updated", SHOP, old),
                         root="/srv/r")
        self.assertEqual(short(tasks)[-2:], [
            ("t6", "/srv/r/etc/init.d/webapp-shop restart", ["t5"]),
            ("t7", "check_answers", ["t6"])])
        self.assertEqual(tasks[1]["title"], "/etc/webapp")  # inside the root

    def test_a_for_removal_item_stops_then_removes_and_leaves_the_account(self):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "etc/init.d"))
            with open(os.path.join(root, "etc/init.d/webapp-shop"), "w"):
                pass
            removed = item("/webapp/shop", "ForRemoval", None, SHOP)
            tasks = tasks_of(removed, root=root)
            self.assertEqual(short(tasks), [
                ("t1", "service[webapp-shop]", []),
                ("t2", "file[/etc/init.d/webapp-shop]", ["t1"]),
                ("t3", "file[/etc/webapp/shop.conf]", ["t1"])])
            self.assertEqual(tasks[0]["attributes"],
                             {"ensure": "absent", "enable": False})
            self.assertEqual(tasks[1]["attributes"], {"ensure": "absent"})
            # Once the script is gone there is nothing to stop.
            os.unlink(os.path.join(root, "etc/init.d/webapp-shop"))
            self.assertEqual([t[1] for t in short(tasks_of(removed,
                                                           root=root))],
                             ["file[/etc/init.d/webapp-shop]",
                              "file[/etc/webapp/shop.conf]"])

    def test_shared_resources_are_made_once_and_the_manifests_win(self):
        a = item("/webapp/a", "Initial", dict(SHOP, port=8081))
        b = item("/webapp/b", "Initial", dict(SHOP, port=8082))
        tasks = tasks_of(b, a)
        titles = [t.get("title") for t in tasks]
        self.assertEqual(titles.count("shop"), 1)
        self.assertEqual(titles.count("/etc/webapp"), 1)
        b_service = [t for t in tasks if t.get("title") == "webapp-b"][0]
        self.assertEqual(b_service["requires"][-1], "t1")   # a's user task
        # An account the manifests declare is required, never changed...
        tasks = tasks_of(a, item("/user/shop", "Applied",
                                 {"ensure": "present"}))
        self.assertNotIn("user", [t.get("type") for t in tasks])
        service = [t for t in tasks if t.get("type") == "service"][0]
        self.assertIn("user[shop]", service["requires"])
        # ...and one that has just left them is taken over, not removed.
        tasks = tasks_of(a, item("/user/shop", "ForRemoval", None,
                                 {"ensure": "present"}))
        self.assertEqual(tasks[0]["replaces"], [["user", "shop"]])

    def test_a_port_freed_by_a_removed_webapp_is_waited_for(self):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "etc/init.d"))
            open(os.path.join(root, "etc/init.d/webapp-old"), "w").close()
            tasks = tasks_of(item("/webapp/old", "ForRemoval", None, SHOP),
                             item("/webapp/shop", "Initial", SHOP), root=root)
        service = [t for t in tasks if t.get("title") == "webapp-shop"][0]
        self.assertIn("/webapp/old", service["requires"])

    def test_with_a_target_the_check_runs_there(self):
        tasks = tasks_of(item("/webapp/shop", "Initial", SHOP),
                         target="web1")
        self.assertEqual(short(tasks)[-1],
                         ("t6", "/etc/init.d/webapp-shop status", ["t5"]))


class WebappValidation(unittest.TestCase):
    def errors(self, *items):
        return [e.to_json() for e in webapp.validate_model(api_of(*items))]

    def test_a_valid_model_has_no_errors(self):
        self.assertEqual(self.errors(
            item("/webapp/a", "Initial", dict(SHOP, port=8081)),
            item("/webapp/b", "Initial", dict(SHOP, port=8082)),
            # A webapp leaving the manifests frees its port.
            item("/webapp/c", "ForRemoval", dict(SHOP, port=8081), SHOP)), [])

    def test_two_webapps_on_one_port_are_each_refused(self):
        self.assertEqual(self.errors(
            item("/webapp/a", "Initial", SHOP),
            item("/webapp/b", "Applied", SHOP, SHOP)), [
            {"vpath": "/webapp/a", "property": "port",
             "message": "port 8080 is also the port of /webapp/b: only one "
                        "can listen on 127.0.0.1:8080"},
            {"vpath": "/webapp/b", "property": "port",
             "message": "port 8080 is also the port of /webapp/a: only one "
                        "can listen on 127.0.0.1:8080"}])

    def test_root_as_owner_is_refused(self):
        errors = self.errors(item("/webapp/a", "Initial",
                                  dict(SHOP, owner="root")))
        self.assertEqual([(e["vpath"], e["property"]) for e in errors],
                         [("/webapp/a", "owner")])
        self.assertIn("owner must not be root", errors[0]["message"])

    def test_a_name_unfit_for_paths_is_refused(self):
        errors = self.errors(item("/webapp/../x", "Initial", SHOP))
        self.assertEqual(len(errors), 1)
        self.assertNotIn("property", errors[0])
        with self.assertRaises(ral.PluginError):
            webapp.create_configuration(api_of(item("/webapp/../x", "Initial",
                                                    SHOP)))


class Answering(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = self.server.body
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class WebappCheck(unittest.TestCase):
    def setUp(self):
        self.stderr = io.StringIO()
        self.redirect = contextlib.redirect_stderr(self.stderr)
        self.redirect.__enter__()

    def tearDown(self):
        self.redirect.__exit__(None, None, None)

    def serve(self, body):
        server = http.server.HTTPServer(("127.0.0.1", 0), Answering)
        server.body = body
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        return server.server_address[1]

    def test_an_answering_webapp_passes(self):
        port = self.serve(b"open\n")
        webapp.check_answers(api_of(), port, message="open", wait=2)
        self.assertIn("127.0.0.1:%d answers" % port, self.stderr.getvalue())

    def test_a_listening_socket_passes_when_no_message_is_asked(self):
        listener = socket.socket()
        self.addCleanup(listener.close)
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        webapp.check_answers(api_of(), listener.getsockname()[1], wait=2)

    def test_a_closed_port_fails_fast_and_says_so(self):
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()                # a port nobody listens on
        started = time.monotonic()
        with self.assertRaises(ral.PluginError) as caught:
            webapp.check_answers(api_of(), port, message="open", wait=0.5)
        self.assertLess(time.monotonic() - started, 2.0)
        self.assertIn("127.0.0.1:%d does not answer as it should after 0.5s"
                      % port, str(caught.exception))
        self.assertIn("refused", str(caught.exception).lower())

    def test_under_noop_nothing_is_asked(self):
        # ral check calls callbacks under noop: a port nobody listens on
        # is then no failure, and nothing waits.
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        started = time.monotonic()
        webapp.check_answers(api_of(noop=True), port, message="open", wait=2)
        self.assertLess(time.monotonic() - started, 1.0)

    def test_a_wrong_answer_fails_naming_both_messages(self):
        port = self.serve(b"closed\n")
        with self.assertRaises(ral.PluginError) as caught:
            webapp.check_answers(api_of(), port, message="open", wait=0.3)
        self.assertIn("it answers 'closed', not 'open'", str(caught.exception))


class WebappInitScript(unittest.TestCase):
    """The init script the plugin writes, run below a fake root as the
    service provider runs it: start, status, answer, stop."""

    def test_it_starts_answers_and_stops_below_the_root(self):
        with tempfile.TemporaryDirectory() as root:
            probe = socket.socket()
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
            probe.close()
            script = os.path.join(root, "etc/init.d/webapp-t")
            os.makedirs(os.path.dirname(script))
            os.makedirs(os.path.join(root, "etc/webapp"))
            with open(script, "w") as fh:
                fh.write(webapp.init_script("t"))
            os.chmod(script, 0o755)
            shop = item("/webapp/t", "Initial",
                        {"port": port, "owner": "me", "message": "hello"})
            conf = webapp.config_text(api_of(shop).query_by_vpath("/webapp/t"))
            with open(os.path.join(root, "etc/webapp/t.conf"), "w") as fh:
                fh.write(conf)
            with open(os.path.join(root, "etc/passwd"), "w") as fh:
                fh.write("me:x:%d:%d::/:/bin/sh\n" % (os.getuid(), os.getgid()))
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                   "RALSH_ROOT_DIR": root}

            def run(action, **extra):
                return subprocess.run([script, action], env=extra or env,
                                      stdin=subprocess.DEVNULL,
                                      capture_output=True, timeout=30)
            self.assertEqual(run("status").returncode, 3)
            # A pid file left naming a live process that is not this
            # daemon (a reused pid) means dead, not running.
            os.makedirs(os.path.join(root, "run"))
            with open(os.path.join(root, "run/webapp-t.pid"), "w") as fh:
                fh.write("%d\n" % os.getpid())
            self.assertEqual(run("status").returncode, 1)
            try:
                started = run("start")
                self.assertEqual(started.returncode, 0, started.stderr)
                self.assertTrue(os.path.exists(
                    os.path.join(root, "run/webapp-t.pid")))
                self.assertEqual(run("status").returncode, 0)
                with contextlib.redirect_stderr(io.StringIO()):
                    webapp.check_answers(api_of(), port, message="hello",
                                         wait=3)
                # Without RALSH_ROOT_DIR it finds its root from where it
                # lies.
                self.assertEqual(run("status", PATH=env["PATH"]).returncode,
                                 0)
            finally:
                stopped = run("stop")
            self.assertEqual(stopped.returncode, 0, stopped.stderr)
            self.assertEqual(run("status").returncode, 3)
            with self.assertRaises(ral.PluginError):
                webapp.check_answers(api_of(), port, wait=0.3)
            self.assertEqual(run("bogus").returncode, 2)


class WebappExecutable(unittest.TestCase):
    def test_the_plugin_answers_as_an_executable(self):
        doc = document(item("/webapp/a", "Initial", SHOP),
                       item("/webapp/b", "Initial", dict(SHOP, owner="root")))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        done = subprocess.run([WEBAPP, "ral_action=validate_model"],
                              input=json.dumps(doc).encode(), env=env,
                              capture_output=True, timeout=30)
        self.assertEqual(done.returncode, 0, done.stderr)
        errors = json.loads(done.stdout)["errors"]
        self.assertEqual(sorted((e["vpath"], e["property"]) for e in errors),
                         [("/webapp/a", "port"), ("/webapp/b", "owner"),
                          ("/webapp/b", "port")])
        done = subprocess.run([WEBAPP, "ral_action=update_model"],
                              input=b"{}", env=env, capture_output=True,
                              timeout=30)
        self.assertEqual(done.returncode, 1)
        self.assertIn("unknown action 'update_model'",
                      json.loads(done.stdout)["error"]["message"])


class WebappWithProviders(unittest.TestCase):
    """The webapp's answers played as the host would play them, below a
    fake root: each config task set by its bundled provider, remote tasks
    run, callbacks called through the plugin. Create, change, drop."""

    PROVIDERS = {"user": "etc_passwd.prov", "file": "file.prov",
                 "service": "service.prov"}

    def play(self, root, doc):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "RALSH_ROOT_DIR": root,
               "RALSH_PROVIDER_LIB": os.path.join(TOP, "providers")}
        # The native providers' program (user, file), as ral names it.
        if "RALSH_NATIVE_PROGRAM" in os.environ:
            env["RALSH_NATIVE_PROGRAM"] = os.environ["RALSH_NATIVE_PROGRAM"]

        def run(argv, stdin, extra_env=None):
            return subprocess.run(argv, input=json.dumps(stdin).encode(),
                                  env=extra_env or env, capture_output=True,
                                  timeout=60)
        answer = run([WEBAPP, "ral_action=create_configuration"], doc)
        self.assertEqual(answer.returncode, 0, answer.stdout)
        done = []
        for task in json.loads(answer.stdout)["tasks"]:
            if task["kind"] == "config":
                provider = os.path.join(TOP, "providers",
                                        self.PROVIDERS[task["type"]])
                result = run([provider, "ral_action=set"], {
                    "ral": {"noop": False}, "updates": [
                        {"name": task["title"],
                         "should": task["attributes"]}]})
                changes = json.loads(result.stdout)["changes"]
                self.assertFalse([c for c in changes if "error" in c],
                                 task)
            elif task["kind"] == "remote":
                # Run without RALSH_ROOT_DIR, as a runner might.
                result = subprocess.run(task["command"], env={
                    "PATH": env["PATH"]}, capture_output=True, timeout=60)
                self.assertEqual(result.returncode, 0, result.stderr)
            else:
                result = run([WEBAPP, "ral_action=callback"], dict(
                    doc, callback=task["callback"], args=task["args"],
                    kwargs=task["kwargs"]))
                self.assertEqual((result.returncode, result.stdout),
                                 (0, b"{}\n"), result.stdout)
            done.append(task.get("title") or task["kind"])
        return done

    def free_port(self):
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        return port

    def test_create_change_and_drop_converge_below_a_fake_root(self):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "etc/init.d"))
            for name in ("passwd", "group", "shadow"):
                open(os.path.join(root, "etc", name), "w").close()
            first = dict(SHOP, port=self.free_port())
            second = dict(SHOP, port=self.free_port(), message="moved")

            def doc(state, properties, applied):
                return document(item("/webapp/shop", state, properties,
                                     applied), root=root)
            script = os.path.join(root, "etc/init.d/webapp-shop")
            try:
                self.play(root, doc("Initial", first, None))
                with open(os.path.join(root, "etc/passwd")) as fh:
                    self.assertTrue(fh.read().startswith(
                        "shop:x:1000:1000:webapp service account:"
                        "/nonexistent:/usr/sbin/nologin"))
                self.assertTrue(os.path.islink(
                    os.path.join(root, "etc/rc2.d/S01webapp-shop")))
                done = self.play(root, doc("Updated", second, first))
                self.assertIn("remote", done)
                with contextlib.redirect_stderr(io.StringIO()):
                    webapp.check_answers(api_of(), second["port"],
                                         message="moved", wait=2)
                done = self.play(root, doc("ForRemoval", None, second))
                self.assertEqual(done, ["webapp-shop", "/etc/init.d/webapp-shop",
                                        "/etc/webapp/shop.conf"])
            finally:
                if os.path.exists(script):
                    subprocess.run([script, "stop"], env={
                        "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                        capture_output=True, timeout=60)
            self.assertEqual(os.listdir(os.path.join(root, "etc/webapp")), [])
            self.assertFalse(os.path.exists(script))
            with open(os.path.join(root, "etc/passwd")) as fh:
                self.assertIn("shop:", fh.read())    # the account is left
            with self.assertRaises(ral.PluginError):
                webapp.check_answers(api_of(), second["port"], wait=0.3)


if __name__ == "__main__":
    unittest.main(verbosity=2)
