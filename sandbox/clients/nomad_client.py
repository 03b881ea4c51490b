"""python-nomad (2.1.0) against the sandbox's scheduler: deployments through the client's calls.

Environment:
  QUARTET_SCHEDULER_ADDR   base URL of the scheduler (http://127.0.0.1:PORT); the sandbox admin
                           API (/_sandbox/scheduler/...) is on the same listener
  QUARTET_SCHEDULER_TOKEN  a management token (the sandbox's --root-token)

Jobs are registered through the sandbox admin API (the sandbox does not emulate job submission,
scheduling or clients); everything else goes through python-nomad. Exits non-zero at the first
answer that differs from what the real service gives.
"""

import os
import sys

import nomad
import requests
from nomad.api import exceptions as nx
from _check import check, raises, step

ADDR = os.environ["QUARTET_SCHEDULER_ADDR"]
TOKEN = os.environ["QUARTET_SCHEDULER_TOKEN"]

n = nomad.Nomad(address=ADDR, token=TOKEN, timeout=30)
anon = nomad.Nomad(address=ADDR, timeout=30)


def admin(path, body):
    r = requests.post(f"{ADDR}/_sandbox/scheduler/{path}", json=body, timeout=30)
    assert r.ok, (path, r.status_code, r.text)
    return r.json() if r.content else None


def group(name, count, canary=0, health="checks", deadline=600_000_000_000, **kw):
    g = {"Name": name, "Count": count, "Canary": canary, "MaxParallel": count,
         "HealthCheck": health, "ProgressDeadline": deadline, "Tasks": ["server"]}
    g.update(kw)
    return g


step("start-up calls: status, regions, agent, token self")
check(n.status.leader.get_leader(), "leader")
check(n.regions.get_regions() == ["global"], "regions")
check(n.agent.get_agent()["config"]["Region"] == "global", "agent self")
check(n.acl.get_self_token()["Type"] == "management", "token self")
raises(nx.URLNotAuthorizedNomadException, anon.deployments.get_deployments)

step("a job with canaries: version 0 rolls out, version 1 waits for promotion")
v0 = admin("jobs", {"ID": "web", "TaskGroups": [group("web", 2, canary=1), group("api", 1)]})
admin(f"deployments/{v0['DeploymentID']}/health", {"Healthy": True})
check(n.deployment.get_deployment(v0["DeploymentID"])["Status"] == "successful", "v0 successful")
v1 = admin("jobs", {"ID": "web", "TaskGroups": [group("web", 2, canary=1, tasks_v=2),
                                                  group("api", 1)]})
dep_id = v1["DeploymentID"]

step("deployments list: prefix (even hex), namespace, items are dicts")
deps = n.deployments.get_deployments()
check({d["ID"] for d in deps} >= {v0["DeploymentID"], dep_id}, "list", deps)
check([d["ID"] for d in n.deployments.get_deployments(prefix=dep_id[:4])] == [dep_id]
      or dep_id in [d["ID"] for d in n.deployments.get_deployments(prefix=dep_id[:4])], "prefix")
raises(nx.BaseNomadException, n.deployments.get_deployments, prefix=dep_id[:3])
check(n.deployments.get_deployments(namespace="*"), "namespace *")
check(dep_id in n.deployments, "__contains__")

step("deployment read, 404 for an absent one, 500 for a short id")
d = n.deployment.get_deployment(dep_id)
check(d["ID"] == dep_id and d["JobID"] == "web" and d["Status"] == "running", d)
check(d["TaskGroups"]["web"]["DesiredCanaries"] == 1, d["TaskGroups"])
check(d["TaskGroups"]["web"]["Promoted"] is False, d["TaskGroups"])
raises(nx.URLNotFoundNomadException, n.deployment.get_deployment,
       "00000000-0000-0000-0000-000000000000")
raises(nx.BaseNomadException, n.deployment.get_deployment, dep_id[:8])

step("allocations of the deployment: born pending, canary flagged")
allocs = n.deployment.get_deployment_allocations(dep_id)
canaries = [a for a in allocs if (a.get("DeploymentStatus") or {}).get("Canary")]
check(len(canaries) == 1, "one canary", allocs)
check(canaries[0]["ClientStatus"] == "pending" and canaries[0]["TaskStates"] is None,
      canaries[0])

step("allocation reads: list (prefix), by id, per job; unknown is 404")
listed = n.allocations.get_allocations()
check({a["ID"] for a in allocs} <= {a["ID"] for a in listed}, "every allocation listed")
check(n.allocations.get_allocations(prefix=canaries[0]["ID"][:4]), "prefix")
a = n.allocation.get_allocation(canaries[0]["ID"])
check(a["ID"] == canaries[0]["ID"] and a["DeploymentID"] == dep_id, a)
check({x["ID"] for x in n.job.get_allocations("web")} >= {x["ID"] for x in allocs}, "job allocs")
raises(nx.URLNotFoundNomadException, n.allocation.get_allocation,
       "00000000-0000-0000-0000-000000000000")

step("promote before the canary is healthy: 500 naming the group's healthy count")
e = raises(nx.BaseNomadException, n.deployment.promote_deployment_all, dep_id)
check('Task group "web" has 0/1 healthy allocations' in e.nomad_resp.text, e.nomad_resp.text)

step("promote of a group without canaries (and an unknown group) succeeds")
r = n.deployment.promote_deployment_groups(dep_id, groups=["api", "nope"])
check(r["EvalID"] and r["DeploymentModifyIndex"] > 0, r)

step("evaluations: the one a control answers, the one that placed an allocation, lists")
ev = n.evaluation.get_evaluation(r["EvalID"])
check(ev["ID"] == r["EvalID"] and ev["DeploymentID"] == dep_id and ev["JobID"] == "web", ev)
check(ev["Status"] == "complete", ev["Status"])
placed = n.evaluation.get_allocations(canaries[0]["EvalID"])
check(canaries[0]["ID"] in [x["ID"] for x in placed], placed)
check(r["EvalID"] in [e["ID"] for e in n.evaluations.get_evaluations()], "evaluations list")
check(r["EvalID"] in [e["ID"] for e in n.job.get_evaluations("web")], "job evaluations")
raises(nx.URLNotFoundNomadException, n.evaluation.get_evaluation,
       "00000000-0000-0000-0000-000000000000")

step("pause and resume restart the deadline; resume says 'Deployment is running'")
r = n.deployment.pause_deployment(dep_id, True)
check(r["EvalID"] == "" or r["EvalID"] is None or isinstance(r["EvalID"], str), r)
check(n.deployment.get_deployment(dep_id)["Status"] == "paused", "paused")
n.deployment.pause_deployment(dep_id, False)
d = n.deployment.get_deployment(dep_id)
check(d["Status"] == "running" and d["StatusDescription"] == "Deployment is running", d)

step("blocking query on the deployment: returns after the wait without change")
resp = n.deployment.request(dep_id, method="get", params={"index": 10**9, "wait": "50ms"})
check(resp.headers.get("X-Nomad-Index"), resp.headers)

step("allocation health through the client (accepted for a 'checks' group too)")
r = n.deployment.deployment_allocation_health(dep_id, healthy_allocations=[canaries[0]["ID"]])
check(r["DeploymentModifyIndex"] > 0, r)
check(n.deployment.get_deployment(dep_id)["TaskGroups"]["web"]["HealthyAllocs"] == 1, "healthy")

step("promote all once the canary is healthy")
r = n.deployment.promote_deployment_all(dep_id)
check(r["EvalID"], r)
d = n.deployment.get_deployment(dep_id)
check(d["TaskGroups"]["web"]["Promoted"] is True, d["TaskGroups"])
allocs = n.deployment.get_deployment_allocations(dep_id)
check(not any((a.get("DeploymentStatus") or {}).get("Canary") for a in allocs), "canary cleared")

step("job reads: the job, its deployments, its latest deployment")
job = n.job.get_job("web")
check(job["ID"] == "web" and job["Version"] == 1, job.get("Version"))
check([x["ID"] for x in n.job.get_deployments("web")][0] == dep_id, "newest first")
check(n.job.get_deployment("web")["ID"] == dep_id, "latest")
raises(nx.URLNotFoundNomadException, n.job.get_job, "absent")

step("fail: the deployment ends failed; a second fail is refused")
r = n.deployment.fail_deployment(dep_id)
check("EvalID" in r and "RevertedJobVersion" in r, r)
check(n.deployment.get_deployment(dep_id)["Status"] == "failed", "failed")
e = raises(nx.BaseNomadException, n.deployment.fail_deployment, dep_id)
check("can't fail terminal deployment" in e.nomad_resp.text, e.nomad_resp.text)

step("unhealthy allocation reported through the client fails the deployment")
v2 = admin("jobs", {"ID": "batch", "TaskGroups": [group("b", 1, health="manual")]})
a = n.deployment.get_deployment_allocations(v2["DeploymentID"])[0]
n.deployment.deployment_allocation_health(v2["DeploymentID"], unhealthy_allocations=[a["ID"]])
d = n.deployment.get_deployment(v2["DeploymentID"])
check(d["Status"] == "failed" and d["StatusDescription"] == "Failed due to unhealthy allocations",
      d["StatusDescription"])

step("unblock of a running deployment is refused")
v3 = admin("jobs", {"ID": "multi", "Multiregion": True, "TaskGroups": [group("m", 1)]})
e = raises(nx.BaseNomadException, n.deployment.request, "unblock", v3["DeploymentID"],
           method="post", json={"DeploymentID": v3["DeploymentID"]})
check("can't unblock running deployment" in e.nomad_resp.text, e.nomad_resp.text)
admin(f"deployments/{v3['DeploymentID']}/health", {"Healthy": True})
check(n.deployment.get_deployment(v3["DeploymentID"])["Status"] == "blocked", "blocked")
n.deployment.request("unblock", v3["DeploymentID"], method="post",
                     json={"DeploymentID": v3["DeploymentID"]})
check(n.deployment.get_deployment(v3["DeploymentID"])["Status"] == "successful", "unblocked")

step("ACL set-up through the client: policy, token, read-job only")
n.acl.create_policy("reader", {"Name": "reader", "Rules": 'namespace "default" { policy = "read" }'})
tok = n.acl.create_token({"Name": "r", "Type": "client", "Policies": ["reader"]})
reader = nomad.Nomad(address=ADDR, token=tok["SecretID"], timeout=30)
check(reader.deployment.get_deployment(dep_id)["ID"] == dep_id, "reader reads")
raises(nx.URLNotAuthorizedNomadException, reader.deployment.fail_deployment, v2["DeploymentID"])
n.acl.delete_token(tok["AccessorID"])
n.acl.delete_policy("reader")

print("python-nomad: all calls answered as the real service does")
