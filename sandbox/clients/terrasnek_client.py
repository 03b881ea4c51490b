"""terrasnek (0.1.14) against the sandbox's workspace service: workspaces, remote state
consumers, tags, configuration versions, runs and no-code provisioning through its calls.

Environment:
  QUARTET_WORKSPACES_ADDR   base URL of the workspace service (http://127.0.0.1:PORT); the
                            sandbox admin API (/_sandbox/workspaces/...) is on the same listener
  QUARTET_WORKSPACES_TOKEN  a token of the organization's owners team (the sandbox --root-token)
  QUARTET_WORKSPACES_ORG    the organization the sandbox created (default `quartet`)

Registry modules (published outside the API) and the run clock come from the sandbox admin API.
Exits non-zero at the first answer that differs from what the real service gives.
"""

import os
import time

import requests
from terrasnek.api import TFC
from terrasnek import exceptions as tx
from _check import check, raises, step, uniq

ADDR = os.environ["QUARTET_WORKSPACES_ADDR"]
TOKEN = os.environ["QUARTET_WORKSPACES_TOKEN"]
ORG = os.environ.get("QUARTET_WORKSPACES_ORG", "quartet")

api = TFC(TOKEN, url=ADDR)
api.set_org(ORG)

CONFIRMABLE = {"planned", "cost_estimated", "policy_checked", "post_plan_completed"}


def admin(method, path, body):
    r = requests.request(method, f"{ADDR}/_sandbox/workspaces/{path}", json=body, timeout=30)
    assert r.ok, (path, r.status_code, r.text)
    return r.json() if r.content else None


def ws_payload(**attrs):
    return {"data": {"type": "workspaces", "attributes": attrs}}


def wait_run(run_id, statuses, limit=400):
    for _ in range(limit):
        r = api.runs.show(run_id)["data"]
        if r["attributes"]["status"] in statuses:
            return r
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} never reached {statuses}: {r['attributes']['status']}")


def run_payload(ws_id, **attrs):
    return {"data": {"type": "runs", "attributes": attrs,
                     "relationships": {"workspace": {"data": {"type": "workspaces", "id": ws_id}}}}}


admin("PUT", "settings", {"step_ms": 40, "force_cancel_cooloff_ms": 300})

step("workspace create, show by name and id, update, setting-overwrites")
name = uniq("ws")
ws = api.workspaces.create(ws_payload(name=name, description="made by terrasnek"))["data"]
wid = ws["id"]
a = ws["attributes"]
check(a["setting-overwrites"] == {"execution-mode": False, "agent-pool": False}, a)
check(a["working-directory"] is None and "locked-reason" in a, a)
check("no-code-upgrade-available" not in a, "only on no-code workspaces")
check(api.workspaces.show(workspace_name=name)["data"]["id"] == wid, "show by name")
check(api.workspaces.show(workspace_id=wid)["data"]["attributes"]["name"] == name, "show by id")
u = api.workspaces.update(ws_payload(**{"execution-mode": "local", "auto-destroy-at": None}),
                          workspace_id=wid)["data"]["attributes"]
check(u["execution-mode"] == "local" and u["setting-overwrites"]["execution-mode"] is True, u)
u = api.workspaces.update(ws_payload(**{"setting-overwrites": {"execution-mode": False,
                                                               "agent-pool": False}}),
                          workspace_name=name)["data"]["attributes"]
check(u["execution-mode"] == "remote", "reverted to the organization default", u)
u = api.workspaces.update(ws_payload(**{"trigger-prefixes": ["mod/"]}), workspace_id=wid)
u = api.workspaces.update(ws_payload(**{"trigger-patterns": ["mod/**"]}), workspace_id=wid)
check(u["data"]["attributes"]["trigger-patterns"] == ["mod/**"], "trigger-patterns alone ok")

step("workspace list: a page with absolute links, and list_all over several pages")
prefix = uniq("pg")
made = [api.workspaces.create(ws_payload(name=f"{prefix}-{i}"))["data"]["id"] for i in range(4)]
page = api.workspaces.list(page=1, page_size=2, search={"name": prefix})
check(len(page["data"]) == 2 and page["meta"]["pagination"]["total-count"] == 4, page["meta"])
check(page["links"]["next"].startswith("http"), "absolute links", page["links"])
everything = api.workspaces.list_all(search={"name": prefix})
check(sorted(w["id"] for w in everything["data"]) == sorted(made), everything.keys())

step("tags: add, list, remove")
api.workspaces.add_tags(wid, {"data": [{"type": "tags", "attributes": {"name": "web"}}]})
check([t["attributes"]["name"] for t in api.workspaces.list_tags(wid)["data"]] == ["web"], "tags")
api.workspaces.remove_tags(wid, {"data": [{"type": "tags", "attributes": {"name": "web"}}]})
check(api.workspaces.list_tags(wid)["data"] == [], "no tags")

step("remote state consumers: add, page through, replace, delete")
refs = [{"type": "workspaces", "id": i} for i in made]
api.workspaces.add_remote_state_consumers(wid, {"data": refs})
p1 = api.workspaces.get_remote_state_consumers(wid, page=1, page_size=3)
p2 = api.workspaces.get_remote_state_consumers(wid, page=2, page_size=3)
check(len(p1["data"]) == 3 and len(p2["data"]) == 1, p1["meta"], p2["meta"])
check(p1["links"]["next"].startswith("http"), p1["links"])
api.workspaces.replace_remote_state_consumers(wid, {"data": refs[:2]})
check(len(api.workspaces.get_remote_state_consumers(wid)["data"]) == 2, "replaced")
api.workspaces.delete_remote_state_consumers(wid, {"data": refs[:1]})
check(len(api.workspaces.get_remote_state_consumers(wid)["data"]) == 1, "deleted one")

step("runs need a configuration: 422 Configuration version is missing")
e = raises(tx.TFCHTTPUnprocessableEntity, api.runs.create, run_payload(made[0]))
check("Configuration version is missing" in str(e), e)

step("configuration version: create, upload from a string, show")
cv = api.config_versions.create(wid, {"data": {"type": "configuration-versions",
                                               "attributes": {"auto-queue-runs": False}}})["data"]
api.config_versions.upload_from_string('resource "null_resource" "x" {}\n',
                                       cv["attributes"]["upload-url"])
for _ in range(200):
    if api.config_versions.show(cv["id"])["data"]["attributes"]["status"] == "uploaded":
        break
    time.sleep(0.05)
check(api.config_versions.show(cv["id"])["data"]["attributes"]["status"] == "uploaded", "uploaded")
check(cv["id"] in [c["id"] for c in api.config_versions.list(wid)["data"]], "listed")

step("runs: apply a confirmable run, discard another")
run = api.runs.create(run_payload(wid, message="terrasnek"))["data"]
check(run["attributes"]["target-addrs"] is None, run["attributes"]["target-addrs"])
run = wait_run(run["id"], CONFIRMABLE)
check(run["attributes"]["actions"]["is-confirmable"] is True, run["attributes"]["actions"])
api.runs.apply(run["id"], {"comment": "go"})
wait_run(run["id"], {"applied"})
run = api.runs.create(run_payload(wid))["data"]
run = wait_run(run["id"], CONFIRMABLE)
api.runs.discard(run["id"], {"comment": "no"})
wait_run(run["id"], {"discarded"})
e = raises(tx.TFCHTTPConflict, api.runs.apply, run["id"], {"comment": "late"})
check(e, "apply outside is-confirmable is 409")

step("runs: cancel a pending run; force-cancel a run that ignores cancel")
admin("PUT", "settings", {"step_ms": 2000})  # a plan long enough to act on while it runs
admin("POST", "scripts", {"workspace": wid, "cancel": "ignore"})
run = api.runs.create(run_payload(wid))["data"]
run = wait_run(run["id"], {"planning"})
# The scripted run ignores the cancel and stays planning until force-canceled.
api.runs.cancel(run["id"], {"comment": "stop"})
queued = api.runs.create(run_payload(wid))["data"]
qa = queued["attributes"]
check(qa["status"] == "pending" and qa["actions"]["is-cancelable"] is True
      and qa["actions"]["is-discardable"] is False, qa["actions"])
api.runs.cancel(queued["id"], {"comment": "not needed"})
wait_run(queued["id"], {"canceled"})
for _ in range(200):
    if api.runs.show(run["id"])["data"]["attributes"]["actions"]["is-force-cancelable"]:
        break
    time.sleep(0.05)
api.runs.force_cancel(run["id"], {"comment": "now"})
run = wait_run(run["id"], {"canceled"})
check(run["attributes"]["status-timestamps"].get("force-canceled-at"), run["attributes"])
admin("PUT", "settings", {"step_ms": 40})
check(run["id"] in [r["id"] for r in api.runs.list(wid)["data"]], "listed")

step("no-code: enable (enabled by default, floating pin), deploy, upgrade flow")
mod_name = uniq("net")
mod = admin("POST", "registry-modules", {
    "organization": ORG, "name": mod_name, "provider": "aws",
    "versions": [{"version": "1.0.0", "variables": [{"name": "region", "type": "string",
                                                      "required": True}]}]})
nc = api.no_code_provisioning.enable({"data": {
    "type": "no-code-modules", "attributes": {},
    "relationships": {"registry-module": {"data": {"id": mod["id"], "type": "registry-module"}},
                      "variable-options": {"data": [{"type": "variable-options", "attributes": {
                          "variable-name": "region", "variable-type": "string",
                          "options": ["eu-west-1", "us-east-1"]}}]}}}})["data"]
check(nc["attributes"]["enabled"] is True and nc["attributes"]["version-pin"] == "", nc)
check(api.no_code_provisioning.show(nc["id"])["data"]["id"] == nc["id"], "show")
var = lambda v: {"type": "vars", "attributes": {"key": "region", "value": v,
                                                 "category": "terraform"}}
nws = api.no_code_provisioning.deploy(nc["id"], {"data": {
    "type": "workspaces", "attributes": {"name": uniq("ncws")},
    "relationships": {"vars": {"data": [var("eu-west-1")]}}}})["data"]
na = nws["attributes"]
check(na["no-code-upgrade-available"] is False and na["description"] is None, na)
check(na["source-module-id"].startswith(f"private/{ORG}/{mod_name}/aws/"), na["source-module-id"])
first = api.workspaces.show(workspace_id=nws["id"])["data"]["relationships"]["latest-run"]["data"]
wait_run(first["id"], {"applied"})
up = api.no_code_provisioning.update_settings_upgrade(nc["id"], nws["id"], {"data": {
    "type": "workspaces", "relationships": {"vars": {"data": [var("eu-west-1")]}}}})
check("message" in str(up) and "run-" not in str(up), "nothing to upgrade: only a message", up)
admin("POST", f"registry-modules/{mod['id']}/versions",
      {"version": "1.1.0", "variables": [{"name": "region", "type": "string", "required": True}]})
check(api.workspaces.show(workspace_id=nws["id"])["data"]["attributes"]
      ["no-code-upgrade-available"] is True, "upgrade available after a new version")
up = api.no_code_provisioning.update_settings_upgrade(nc["id"], nws["id"], {"data": {
    "type": "workspaces", "relationships": {"vars": {"data": [var("us-east-1")]}}}})["data"]
check(up["id"].startswith("run-"), up)
for _ in range(400):
    st = api.no_code_provisioning.read_upgrade_status(nc["id"], nws["id"], up["id"])
    if st["data"]["attributes"]["status"] in CONFIRMABLE:
        break
    time.sleep(0.05)
check(st["data"]["attributes"]["status"] == "planned", st)
api.no_code_provisioning.confirm_apply_upgrade(nc["id"], nws["id"], up["id"])
wait_run(up["id"], {"applied"})
api.no_code_provisioning.update(nc["id"], {"data": {"type": "no-code-modules",
                                                    "attributes": {"version-pin": "1.0.0"}}})
check(api.no_code_provisioning.show(nc["id"])["data"]["attributes"]["version-pin"] == "1.0.0",
      "pinned")

step("workspace destroy")
for i in made:
    api.workspaces.destroy(workspace_id=i)
raises(tx.TFCHTTPNotFound, api.workspaces.show, workspace_id=made[0])

print("terrasnek: all calls answered as the real service does")
