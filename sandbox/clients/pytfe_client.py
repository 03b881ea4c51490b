"""python-tfe (PyPI `pytfe` 1.5.0, HashiCorp's official Python SDK) against the sandbox's
workspace service: workspaces, tag bindings, remote state consumers, configuration versions,
runs and no-code provisioning through the client's own calls.

Environment:
  QUARTET_WORKSPACES_ADDR   base URL of the workspace service (http://127.0.0.1:PORT); the
                            sandbox admin API (/_sandbox/workspaces/...) is on the same listener
  QUARTET_WORKSPACES_TOKEN  a token of the organization's owners team (the sandbox --root-token)
  QUARTET_WORKSPACES_ORG    the organization the sandbox created (default `quartet`)

Registry modules (published outside the API) and the run clock come from the sandbox admin API.
Exits non-zero at the first answer that differs from what the real service gives.
"""

import os
import tempfile
import time

import requests
from pytfe import TFEClient, TFEConfig, errors
from pytfe import models as m
from _check import check, raises, step, uniq

ADDR = os.environ["QUARTET_WORKSPACES_ADDR"]
TOKEN = os.environ["QUARTET_WORKSPACES_TOKEN"]
ORG = os.environ.get("QUARTET_WORKSPACES_ORG", "quartet")

tfe = TFEClient(TFEConfig(address=ADDR, token=TOKEN, max_retries=0, timeout=30))


def admin(method, path, body):
    r = requests.request(method, f"{ADDR}/_sandbox/workspaces/{path}", json=body, timeout=30)
    assert r.ok, (path, r.status_code, r.text)
    return r.json() if r.content else None


def wait_run(run_id, statuses, limit=400):
    for _ in range(limit):
        r = tfe.runs.read(run_id)
        if r.status in statuses:
            return r
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} never reached {statuses}: {r.status}")


def upload_config(ws_id):
    cv = tfe.configuration_versions.create(
        ws_id, m.ConfigurationVersionCreateOptions(auto_queue_runs=False))
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "main.tf"), "w") as f:
            f.write('resource "null_resource" "x" {}\n')
        tfe.configuration_versions.upload(cv.upload_url, d)
    for _ in range(200):
        cv = tfe.configuration_versions.read(cv.id)
        if cv.status == "uploaded":
            return cv
        time.sleep(0.05)
    raise AssertionError(f"configuration version {cv.id} stayed {cv.status}")


admin("PUT", "settings", {"step_ms": 40, "force_cancel_cooloff_ms": 300})

step("workspace create: defaults, setting-overwrites inherit the organization's")
name = uniq("ws")
ws = tfe.workspaces.create(ORG, m.WorkspaceCreateOptions(name=name, description="made by pytfe"))
check(ws.id.startswith("ws-") and ws.name == name, ws.id)
check(ws.setting_overwrites.execution_mode is False and ws.setting_overwrites.agent_pool is False,
      ws.setting_overwrites)
check(ws.working_directory is None, "working-directory null when unset", ws.working_directory)
check(ws.locked is False, "locked")

step("workspace read by name and id; update execution mode, then revert to the default")
check(tfe.workspaces.read(name, organization=ORG).id == ws.id, "read by name")
check(tfe.workspaces.read(name, organization=ORG.upper()).id == ws.id, "org names case-insensitive")
up = tfe.workspaces.update_by_id(ws.id, m.WorkspaceUpdateOptions(
    execution_mode="local", auto_apply=True, auto_apply_run_trigger=True,
    description="changed"))
check(up.execution_mode == "local" and up.setting_overwrites.execution_mode is True, up.execution_mode)
check(up.auto_apply is True and up.auto_apply_run_trigger is True, "stored and echoed")
up = tfe.workspaces.update_by_id(ws.id, m.WorkspaceUpdateOptions(
    setting_overwrites=m.WorkspaceSettingOverwrites(execution_mode=False, agent_pool=False)))
check(up.execution_mode == "remote" and up.setting_overwrites.execution_mode is False,
      "{false,false} reverts to the organization default", up.execution_mode)
up = tfe.workspaces.update(name, m.WorkspaceUpdateOptions(auto_apply=False), organization=ORG)
check(up.auto_apply is False, "update by name")

step("workspace list with pagination (page size 2 over 5 workspaces)")
prefix = uniq("pg")
made = [tfe.workspaces.create(ORG, m.WorkspaceCreateOptions(name=f"{prefix}-{i}")).id
        for i in range(5)]
listed = [w.id for w in tfe.workspaces.list(ORG, m.WorkspaceListOptions(page_size=2,
                                                                       search=prefix))]
check(sorted(listed) == sorted(made), "every page followed", listed)

step("tag bindings: add, list, effective, limits")
tb = list(tfe.workspaces.add_tag_bindings(ws.id, m.WorkspaceAddTagBindingsOptions(
    tag_bindings=[m.TagBinding(key="env", value="prod"), m.TagBinding(key="team", value="a")])))
check({(t.key, t.value) for t in tb} >= {("env", "prod"), ("team", "a")}, tb)
check({(t.key, t.value) for t in tfe.workspaces.list_tag_bindings(ws.id)} ==
      {("env", "prod"), ("team", "a")}, "listed")
check({t.key for t in tfe.workspaces.list_effective_tag_bindings(ws.id)} >= {"env", "team"},
      "effective")
raises(errors.TFEError, lambda: list(tfe.workspaces.add_tag_bindings(
    ws.id, m.WorkspaceAddTagBindingsOptions(tag_bindings=[m.TagBinding(key="hc:x", value="1")]))))
tagged = tfe.workspaces.create(ORG, m.WorkspaceCreateOptions(
    name=uniq("tagged"), tag_bindings=[m.TagBinding(key="env", value="dev")]))
check([(t.key, t.value) for t in tfe.workspaces.list_tag_bindings(tagged.id)] == [("env", "dev")],
      "tag bindings given on create")
tfe.workspaces.update_by_id(tagged.id, m.WorkspaceUpdateOptions(
    tag_bindings=[m.TagBinding(key="env", value="prod")]))
check([(t.key, t.value) for t in tfe.workspaces.list_tag_bindings(tagged.id)] == [("env", "prod")],
      "tag bindings given on update")
tfe.workspaces.delete_by_id(tagged.id)
tfe.workspaces.delete_all_tag_bindings(ws.id)
check(list(tfe.workspaces.list_tag_bindings(ws.id)) == [], "all deleted")

step("remote state consumers: add, list with pagination, remove")
tfe.workspaces.add_remote_state_consumers(ws.id, m.WorkspaceAddRemoteStateConsumersOptions(
    workspaces=[m.Workspace(id=i) for i in made]))
consumers = [w.id for w in tfe.workspaces.list_remote_state_consumers(
    ws.id, m.WorkspaceListRemoteStateConsumersOptions(page_size=2))]
check(sorted(consumers) == sorted(made), consumers)
tfe.workspaces.remove_remote_state_consumers(ws.id, m.WorkspaceRemoveRemoteStateConsumersOptions(
    workspaces=[m.Workspace(id=made[0])]))
check(len(list(tfe.workspaces.list_remote_state_consumers(ws.id))) == 4, "removed one")

step("a run on a workspace that never had a configuration: 422 Configuration version is missing")
e = raises(errors.TFEError, tfe.runs.create, m.RunCreateOptions(workspace=m.Workspace(id=made[1])))
check("Configuration version is missing" in str(e) or
      any("Configuration version is missing" in str(x) for x in e.errors), e, e.errors)

step("configuration version: create, upload, read")
cv = upload_config(ws.id)
check(cv.id.startswith("cv-"), cv.id)
check(cv.id in [c.id for c in tfe.configuration_versions.list(ws.id)], "listed")

step("run: plan stops for confirmation; apply when confirmable")
run = tfe.runs.create(m.RunCreateOptions(workspace=m.Workspace(id=ws.id), message="pytfe"))
check(run.target_addrs is None and run.replace_addrs is None, "null when unset", run.target_addrs, run.replace_addrs)
run = wait_run(run.id, {"planned", "cost_estimated", "policy_checked", "post_plan_completed"})
check(run.actions.is_confirmable is True, run.actions)
tfe.runs.apply(run.id, m.RunApplyOptions(comment="go"))
run = wait_run(run.id, {"applied"})
check(run.id in [r.id for r in tfe.runs.list(ws.id)], "run listed")

step("run: discard a planned run")
run = tfe.runs.create(m.RunCreateOptions(workspace=m.Workspace(id=ws.id)))
run = wait_run(run.id, {"planned", "cost_estimated", "policy_checked", "post_plan_completed"})
check(run.actions.is_discardable is True, run.actions)
tfe.runs.discard(run.id, m.RunDiscardOptions(comment="no"))
check(wait_run(run.id, {"discarded"}).status == "discarded", "discarded")

step("run: a pending run is cancelable; cancel while planning, then force-cancel")
admin("PUT", "settings", {"step_ms": 2000})  # a plan long enough to act on while it runs
admin("POST", "scripts", {"workspace": ws.id, "cancel": "ignore"})
run = tfe.runs.create(m.RunCreateOptions(workspace=m.Workspace(id=ws.id)))
run = wait_run(run.id, {"planning"})
check(run.actions.is_cancelable is True, run.actions)
# The scripted run ignores the cancel and stays planning until force-canceled.
tfe.runs.cancel(run.id, m.RunCancelOptions(comment="stop"))
queued = tfe.runs.create(m.RunCreateOptions(workspace=m.Workspace(id=ws.id)))
check(queued.status == "pending", queued.status)
check(queued.actions.is_cancelable is True and queued.actions.is_discardable is False,
      queued.actions)
tfe.runs.cancel(queued.id, m.RunCancelOptions(comment="not needed"))
check(wait_run(queued.id, {"canceled"}).status == "canceled", "pending run canceled")
for _ in range(200):
    run = tfe.runs.read(run.id)
    if run.actions.is_force_cancelable:
        break
    time.sleep(0.05)
check(run.actions.is_force_cancelable, "force-cancel available after the cool-off", run.actions)
tfe.runs.force_cancel(run.id, m.RunForceCancelOptions(comment="now"))
run = wait_run(run.id, {"canceled"})
check(run.status_timestamps.force_canceled_at is not None, run.status_timestamps)
admin("PUT", "settings", {"step_ms": 40})

step("no-code: module enabled without `enabled`, floating pin; workspace; upgrade")
mod_name = uniq("net")
mod = admin("POST", "registry-modules", {
    "organization": ORG, "name": mod_name, "provider": "aws",
    "versions": [{"version": "1.0.0", "variables": [{"name": "region", "type": "string",
                                                      "required": True}]}]})
nc = tfe.no_code_modules.create(ORG, m.NoCodeModuleCreateOptions(
    registry_module_id=mod["id"],
    variable_options=[m.NoCodeVariableOption(variable_name="region", variable_type="string",
                                             options=["eu-west-1", "us-east-1"])]))
check(nc.enabled is True and nc.version_pin == "", nc)
check(tfe.no_code_modules.read(nc.id).id == nc.id, "read")
project = next(p for p in tfe.projects.list(ORG) if p.name == "Default Project")
nws = tfe.no_code_modules.create_workspace(nc.id, m.NoCodeWorkspaceCreateOptions(
    name=uniq("ncws"), project_id=project.id, vars=[m.NoCodeWorkspaceVariable(key="region", value="eu-west-1",
                                                       category="terraform")]))
check(nws.id.startswith("ws-") and nws.no_code_upgrade_available is False, nws.id)
check(nws.source_module_id and nws.source_module_id.startswith(f"private/{ORG}/{mod_name}/aws/"),
      nws.source_module_id)
first = tfe.workspaces.read_by_id(nws.id).latest_run
wait_run(first.id, {"applied"})
up = tfe.no_code_modules.upgrade_workspace(nc.id, nws.id)
check(up.message and not up.id, "nothing to upgrade: a message, no run", up)
admin("POST", f"registry-modules/{mod['id']}/versions",
      {"version": "1.1.0", "variables": [{"name": "region", "type": "string", "required": True}]})
check(tfe.workspaces.read_by_id(nws.id).no_code_upgrade_available is True, "upgrade available")
up = tfe.no_code_modules.upgrade_workspace(nc.id, nws.id, m.NoCodeWorkspaceUpgradeOptions(
    vars=[m.NoCodeWorkspaceVariable(key="region", value="us-east-1", category="terraform")]))
check(up.id and up.id.startswith("run-"), up)
for _ in range(400):
    st = tfe.no_code_modules.read_workspace_upgrade(nc.id, nws.id, up.id)
    if st.status in ("planned", "cost_estimated", "policy_checked", "post_plan_completed"):
        break
    time.sleep(0.05)
check(st.status == "planned", "upgrade run stops for confirmation", st.status)
tfe.no_code_modules.confirm_workspace_upgrade(nc.id, nws.id, up.id)
wait_run(up.id, {"applied"})
check(tfe.workspaces.read_by_id(nws.id).no_code_upgrade_available is False, "upgraded")
tfe.no_code_modules.update(nc.id, m.NoCodeModuleUpdateOptions(
    registry_module_id=mod["id"], enabled=True, version_pin="1.0.0"))
check(tfe.no_code_modules.read(nc.id).version_pin == "1.0.0", "pinned")

step("workspace delete")
for i in made:
    tfe.workspaces.delete_by_id(i)
raises(errors.NotFound, tfe.workspaces.read_by_id, made[0])

print("python-tfe: all calls answered as the real service does")
