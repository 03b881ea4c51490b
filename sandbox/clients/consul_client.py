"""py-consul (1.8.0) against the sandbox's catalog: the ACL API through the client's calls.

Environment:
  QUARTET_CATALOG_ADDR   base URL of the catalog (http://127.0.0.1:PORT); the sandbox admin API
                         (/_sandbox/catalog/...) is on the same listener

The catalog starts with ACLs not bootstrapped; the script bootstraps them. py-consul sends
`X-Consul-Token`; the sandbox's header is `X-Catalog-Token`, so the client's requests session
gets an adapter renaming it (sandbox/clients/_rename_header.py). Calls py-consul has no method for
(replication status, blocking queries on ACL lists and reads) go through the client's own HTTP
layer (`c.http.get` with its callbacks). Exits non-zero at the first answer that differs from
what the real service gives.
"""

import base64
import hashlib
import hmac
import json
import os
import re
import time
import urllib.parse
import uuid

import consul
import requests
from consul.callback import CB

from _rename_header import session
from _check import check, raises, step

ADDR = urllib.parse.urlparse(os.environ["QUARTET_CATALOG_ADDR"])


def client(token=None):
    c = consul.Consul(host=ADDR.hostname, port=ADDR.port, scheme=ADDR.scheme, token=token)
    c.http.session = session("X-Consul-Token", "X-Catalog-Token")
    return c


def b64(d):
    return base64.urlsafe_b64encode(d).rstrip(b"=").decode()


def sa_jwt(ns, name, ttl=600):
    """A Kubernetes service-account token (signed with a throwaway key: an auth method without a
    validation key in the sandbox only checks its shape and expiry, as a TokenReview would)."""
    now = int(time.time())
    claims = {"iss": "https://kubernetes.default.svc", "sub": f"system:serviceaccount:{ns}:{name}",
              "kubernetes.io": {"namespace": ns,
                                "serviceaccount": {"name": name, "uid": str(uuid.uuid4())}},
              "iat": now, "exp": now + ttl}
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64(json.dumps(claims).encode())
    sig = hmac.new(b"k", f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(sig)}"


anon = client()


def catalog_admin(body):
    r = requests.put(f"{ADDR.scheme}://{ADDR.netloc}/_sandbox/catalog/config", json=body, timeout=30)
    check(r.ok, r.status_code, r.text)


step("start-up calls: status leader and peers")
check(anon.status.leader(), "leader")
check(anon.status.peers(), "peers")

step("ACL bootstrap with a secret, then the 403 with the reset index")
secret = str(uuid.uuid4())
boot = anon.acl.bootstrap(bootstrap_secret=secret)
check(boot["SecretID"] == secret, boot)
e = raises(consul.ACLPermissionDenied, anon.acl.bootstrap)
check("ACL bootstrap no longer allowed (reset index:" in str(e), e)
c = client(secret)
check(c.agent.self()["Config"]["Datacenter"] == "dc1", "agent self")

step("tokens without a token are denied for the anonymous token")
e = raises(consul.ACLPermissionDenied, anon.acl.token.list)
check("00000000-0000-0000-0000-000000000002" in str(e), e)

step("policies: create, read, update, list, delete")
# py-consul sends `rules` through json.dumps: a dict becomes JSON rules (which Consul's HCL
# parser reads), so rules are given as a dict.
p = c.acl.policy.create("readers", description="read acl", rules={"acl": "read"})
check(p["Name"] == "readers" and p["ID"], p)
check(json.loads(c.acl.policy.read(p["ID"])["Rules"]) == {"acl": "read"}, "read policy")
p2 = c.acl.policy.update(p["ID"], "readers", description="changed", rules={"acl": "read"})
check(p2["Description"] == "changed", p2)
check("readers" in [x["Name"] for x in c.acl.policy.list()], "policy list")
tmp = c.acl.policy.create("tmp")
check(c.acl.policy.delete(tmp["ID"]) is True, "delete policy")

step("roles: create, read by name, list")
role = c.acl.role.create("ops", policies_name=["readers"], service_identities=[{"ServiceName": "web"}])
check(role["Policies"][0]["Name"] == "readers", role)
check(c.acl.role.read_by_name("ops")["ID"] == role["ID"], "role by name")
check(c.acl.role.read(role["ID"])["Name"] == "ops", "role read")
check(role["ID"] in [r["ID"] for r in c.acl.role.list()], "role list")

step("tokens: create, read, read_self, update, clone, list, delete")
t = c.acl.token.create(description="reader", policies_name=["readers"], roles_name=["ops"],
                       expiration_ttl="1h")
check(t["Policies"][0]["Name"] == "readers" and t["Roles"][0]["Name"] == "ops", t)
check(t.get("ExpirationTime"), t)
reader = client(t["SecretID"])
check(reader.acl.token.read_self()["AccessorID"] == t["AccessorID"], "read_self")
check(len(reader.acl.token.list()) >= 2, "acl:read lists")
raises(consul.ACLPermissionDenied, reader.acl.policy.create, "nope")
u = c.acl.token.update(t["AccessorID"], description="renamed", policies_name=["readers"])
check(u["Description"] == "renamed", u)
check(c.acl.token.read(t["AccessorID"])["Description"] == "renamed", "token read")
cl = c.acl.token.clone(t["AccessorID"], description="copy")
check(cl["AccessorID"] != t["AccessorID"] and cl["Description"] == "copy", cl)
check(c.acl.token.delete(cl["AccessorID"]) is True, "delete token")
# An absent token is 404 `Requested token does not exist: ACL not found`: py-consul answers None.
check(c.acl.token.read(cl["AccessorID"]) is None, "deleted token reads as None")

step("blocking queries on the token list and a policy read (index, wait)")
index, tokens = c.http.get(CB.json(index=True), "/v1/acl/tokens",
                           headers=c.prepare_headers(), params=[])
check(int(index) > 0 and tokens, index)
later, _ = c.http.get(CB.json(index=True), "/v1/acl/tokens", headers=c.prepare_headers(),
                      params=[("index", index), ("wait", "100ms")])
check(later == index, "unchanged index after the wait", later, index)
idx, pol = c.http.get(CB.json(index=True), f"/v1/acl/policy/{p['ID']}",
                      headers=c.prepare_headers(), params=[("index", "1"), ("wait", "1s")])
check(pol["ID"] == p["ID"] and int(idx) > 1, pol)

step("replication status: primary reports zero values")
rep = c.http.get(CB.json(), "/v1/acl/replication", headers=c.prepare_headers())
check(rep["Enabled"] is False and rep["LastError"] == "0001-01-01T00:00:00Z", rep)

step("auth method and binding rule over /v1, login and logout")
cfg = {"Host": "https://kubernetes.default.svc",
       "CACert": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
       "ServiceAccountJWT": sa_jwt("kube-system", "reviewer")}
m = c.acl.auth_method.create("k8s", "kubernetes", config=cfg, max_token_ttl="1h",
                             description="cluster")
check(m["MaxTokenTTL"] == "1h0m0s", m)
check(c.acl.auth_method.read("k8s")["Config"]["Host"] == cfg["Host"], "method read")
check([x["Name"] for x in c.acl.auth_method.list()] == ["k8s"], "method list")
rule = c.acl.binding_rule.create("k8s", "service", "${serviceaccount.name}",
                                 selector="serviceaccount.namespace==default")
check(len(rule["ID"]) == 36, rule)
check([r["ID"] for r in c.acl.binding_rule.list(auth_method="k8s")] == [rule["ID"]], "rules")
check(c.acl.binding_rule.read(rule["ID"])["BindName"] == "${serviceaccount.name}", "rule read")
login = anon.acl.login("k8s", sa_jwt("default", "web"), meta={"pod": "web-1"})
check(login["AuthMethod"] == "k8s" and login["Local"] is True, login)
check(login["ServiceIdentities"][0]["ServiceName"] == "web", login)
raises(consul.ACLPermissionDenied, anon.acl.login, "k8s", sa_jwt("other", "web"))
raises(consul.ACLPermissionDenied, anon.acl.login, "nope", sa_jwt("default", "web"))
raises(consul.ConsulException, anon.acl.login, "k8s", "not-a-jwt")
check(anon.acl.logout(login["SecretID"]) is True, "logout")
raises(consul.ACLPermissionDenied, anon.acl.logout, login["SecretID"])
raises(consul.ACLPermissionDenied, anon.acl.logout, secret)

step("delete the binding rule, the auth method, the role")
check(c.acl.binding_rule.delete(rule["ID"]) is True, "rule delete")
check(c.acl.auth_method.delete("k8s") is True, "method delete")
check(c.acl.role.delete(role["ID"]) is True, "role delete")

step("bootstrap through a follower: the 403 carries the RPC prefix (the reset index still parses)")
catalog_admin({"BootstrapFromFollower": True})
e = raises(consul.ACLPermissionDenied, anon.acl.bootstrap)
check(re.search(r"rpc error making call: ACL bootstrap no longer allowed \(reset index: \d+\)",
                str(e)), e)

step("replication in a secondary: LastError is kept after recovery, health is LastSuccess later")
catalog_admin({"SecondaryDatacenter": "dc2", "TokenReplication": True})
catalog_admin({"ReplicationError": "failed to sync remote tokens"})
rep = c.http.get(CB.json(), "/v1/acl/replication", params=[("dc", "dc2")],
                 headers=c.prepare_headers())
check(rep["Enabled"] is True and rep["LastError"] > rep["LastSuccess"], rep)
catalog_admin({"ReplicationError": ""})
ok = c.http.get(CB.json(), "/v1/acl/replication", params=[("dc", "dc2")],
                headers=c.prepare_headers())
check(ok["LastError"] == rep["LastError"], "never cleared", ok)
check(ok["LastErrorMessage"] == "failed to sync remote tokens", ok)
check(ok["LastSuccess"] > ok["LastError"], "healthy again", ok)

print("py-consul: all calls answered as the real service does")
