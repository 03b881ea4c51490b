"""hvac (2.4.0) against the secrets service: the same script runs against the sandbox and a real
OpenBao (`bao server -dev`), which is the judge; a difference between the two is a sandbox bug.

Environment:
  QUARTET_SECRETS_ADDR          base URL (http://127.0.0.1:PORT)
  QUARTET_SECRETS_TOKEN         a root token
  QUARTET_SECRETS_TOKEN_HEADER  the token header the server reads: X-Secrets-Token for the
                                sandbox, X-Vault-Token for OpenBao. hvac sends X-Vault-Token;
                                its requests session gets an adapter renaming it
                                (sandbox/clients/_rename_header.py), as a user of the sandbox does
  QUARTET_SECRETS_BACKEND       sandbox | openbao: only picks the password login method that
                                makes leases (the sandbox's identity-provider method `idp`, whose
                                users come from its admin API; OpenBao's `userpass`)

Calls hvac has no method for (TOTP MFA methods, login enforcements, admin-generate) go through
hvac's generic `read`/`write_data`/`list`/`delete`, as a user would. Exits non-zero at the first
answer that differs from what OpenBao gives.
"""

import os
import re

import hvac
import requests
from hvac import exceptions as hx

from _rename_header import session
from _check import check, raises, step, uniq

ADDR = os.environ["QUARTET_SECRETS_ADDR"]
ROOT = os.environ["QUARTET_SECRETS_TOKEN"]
HEADER = os.environ.get("QUARTET_SECRETS_TOKEN_HEADER", "X-Vault-Token")
BACKEND = os.environ.get("QUARTET_SECRETS_BACKEND", "openbao")


def client(token=None):
    return hvac.Client(url=ADDR, token=token, session=session("X-Vault-Token", HEADER))


RFC3339_NS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+(Z|[+-]\d\d:\d\d)$")

c = client(ROOT)
check(c.is_authenticated(), "root token works")

step("token create (ttl 1h), lookup-self without period, renew-self without increment")
t = c.auth.token.create(policies=["default"], ttl="1h")
tok = t["auth"]["client_token"]
check(t["auth"]["lease_duration"] == 3600, t["auth"])
child = client(tok)
me = child.auth.token.lookup_self()["data"]
check(me["ttl"] <= 3600 and "period" not in me, me)
r = child.auth.token.renew_self()
check(r["auth"]["lease_duration"] == 3600, "renews to the token's own ttl", r["auth"])
me = child.auth.token.lookup_self()["data"]
check(RFC3339_NS.match(me["issue_time"]), me["issue_time"])
r = child.auth.token.renew_self(increment="10m")
check(r["auth"]["lease_duration"] == 600, r["auth"])
check(c.auth.token.lookup(tok)["data"]["accessor"] == t["auth"]["accessor"], "lookup")
child.auth.token.revoke_self()
raises(hx.Forbidden, child.auth.token.lookup_self)

step("ACL policies: names with '/', data-only sys responses, legacy read at the top level")
name = f"team/{uniq('app')}"
rules = 'path "secret/*" { capabilities = ["read"] }'
c.sys.create_or_update_acl_policy(name=name, policy=rules)
p = c.sys.read_acl_policy(name)
check(p["data"]["policy"] == rules and p["data"]["name"] == name, p)
check("policy" not in p and "name" not in p and "mount_type" not in p, "sys answers in data only", p)
check(name in c.sys.list_acl_policies()["data"]["keys"], "listed")
legacy = c.sys.read_policy(name)
check(legacy["rules"] == rules and legacy["data"]["rules"] == rules, "legacy sys/policy", legacy)
c.sys.delete_acl_policy(name)
raises(hx.InvalidPath, c.sys.read_acl_policy, name)

step("leases from password logins: list, lookup, renew, revoke, revoke-prefix")
if BACKEND == "sandbox":
    mount = "idp"
    c.write_data("auth/idp/config", data={"org_name": "quartet", "token_ttl": "1h",
                                          "token_policies": ["default"]})
    users = [uniq("u") for _ in range(3)]
    for u in users:
        r = requests.put(f"{ADDR}/_sandbox/secrets/idp/users/{u}", json={"password": "pw"},
                         timeout=30)
        check(r.ok, r.text)
    login = lambda u: c.auth.okta.login(u, "pw", use_token=False, mount_point="idp")
else:
    mount = "userpass"
    if "userpass/" not in c.sys.list_auth_methods()["data"]:
        c.sys.enable_auth_method("userpass")
    users = [uniq("u") for _ in range(3)]
    for u in users:
        c.auth.userpass.create_or_update_user(u, "pw", token_ttl="1h", token_policies=["default"])
    login = lambda u: c.auth.userpass.login(u, "pw", use_token=False)
logins = [login(u) for u in users]
prefix = f"auth/{mount}/login/{users[0]}"
keys = c.sys.list_leases(prefix)["data"]["keys"]
check(len(keys) == 1 and re.fullmatch(r"h[0-9a-f]{64}", keys[0]), keys)
lease_id = f"{prefix}/{keys[0]}"
lk = c.sys.read_lease(lease_id)["data"]
check(lk["id"] == lease_id and lk["path"] == prefix, lk)
check("last_renewal" in lk and "last_renewal_time" not in lk, lk)
check(RFC3339_NS.match(lk["issue_time"]), lk["issue_time"])
# A login's lease is its token's: sys/leases/renew refuses it, the token renews it.
e = raises(hx.InvalidRequest, c.sys.renew_lease, lease_id, increment=600)
check("tokens cannot be renewed through this endpoint" in str(e), e)
r = c.auth.token.renew(logins[0]["auth"]["client_token"], increment="10m")
check(r["auth"]["lease_duration"] == 600, r["auth"])
check(RFC3339_NS.match(c.sys.read_lease(lease_id)["data"]["last_renewal"]), "last_renewal set")
c.sys.revoke_lease(lease_id)
raises(hx.InvalidRequest, c.sys.read_lease, lease_id)
# hvac strips a trailing '/' from every path it builds (Adapter.urljoin), so its revoke_prefix
# with a lease-list key ('.../') revokes the prefix on both servers. The raw request with the
# '/' (what the Go client and the CLI send) is 400 and revokes nothing.
raw = c.session.put(f"{ADDR}/v1/sys/leases/revoke-prefix/auth/{mount}/login/{users[1]}/",
                    headers={"X-Vault-Token": ROOT}, timeout=30)
check(raw.status_code == 400, raw.status_code, raw.text)
check(raw.json()["errors"] == ["cannot write to a path ending in '/'"], raw.text)
raw = c.session.put(f"{ADDR}/v1/sys/leases/revoke-force/auth/{mount}/login/{users[1]}/",
                    headers={"X-Vault-Token": ROOT}, timeout=30)
check(raw.status_code == 400, raw.status_code, raw.text)
check(len(c.sys.list_leases(f"auth/{mount}/login/{users[1]}")["data"]["keys"]) == 1,
      "a refused revoke-prefix revokes nothing")
r = c.sys.revoke_prefix(f"auth/{mount}/login/{users[1]}/")
check(r.status_code == 204, r)
raises(hx.InvalidPath, c.sys.list_leases, f"auth/{mount}/login/{users[1]}")
check(client(logins[2]["auth"]["client_token"]).is_authenticated(), "other logins untouched")

step("entities: create, read with group fields, list with key_info, update, delete")
ename = uniq("ent")
e = c.secrets.identity.create_or_update_entity(name=ename, metadata={"team": "a"})
eid = e["data"]["id"]
ent = c.secrets.identity.read_entity(eid)["data"]
for k in ("direct_group_ids", "group_ids", "inherited_group_ids", "last_update_time",
          "merged_entity_ids"):
    check(k in ent, k, ent)
check(ent["direct_group_ids"] == [] and ent["merged_entity_ids"] is None, ent)
lst = c.secrets.identity.list_entities()["data"]
check(eid in lst["keys"] and lst["key_info"][eid]["name"] == ename, lst)
c.secrets.identity.update_entity(eid, name=ename, metadata={"team": "b"})
check(c.secrets.identity.read_entity_by_name(ename)["data"]["metadata"] == {"team": "b"}, "upd")

step("TOTP MFA methods: create (a body method_id is ignored, with a warning), read, update")
r = c.write_data("identity/mfa/method/totp",
                 data={"issuer": "Quartet", "method_name": uniq("m"), "bogus": 1})
mid = r["data"]["method_id"]
check(r["warnings"] == ["Endpoint ignored these unrecognized parameters: [bogus]"], r)
r = c.write_data("identity/mfa/method/totp", data={"issuer": "Q2", "method_id": mid})
check(r["data"]["method_id"] != mid, "a new method", r)
check(any("[method_id]" in w for w in r["warnings"]), r["warnings"])
other = r["data"]["method_id"]
m = c.read(f"identity/mfa/method/totp/{mid}")["data"]
check(m["issuer"] == "Quartet" and m["type"] == "totp" and m["id"] == mid, m)
check("mount_accessor" not in m and "namespace" not in m and "namespace_id" in m, m)
c.write_data(f"identity/mfa/method/totp/{mid}", data={"issuer": "Quartet", "period": 60})
check(c.read(f"identity/mfa/method/totp/{mid}")["data"]["period"] == 60, "updated")
listed = c.list("identity/mfa/method/totp")["data"]["keys"]
check(mid in listed and other in listed, listed)
check(mid in c.list("identity/mfa/method")["data"]["keys"], "every method type listed")
check(c.read(f"identity/mfa/method/{mid}")["data"]["id"] == mid, "read by id")

step("TOTP admin-generate for an entity, then a second one warns")
g = c.write_data("identity/mfa/method/totp/admin-generate",
                 data={"method_id": mid, "entity_id": eid})
check(g["data"]["url"].startswith(f"otpauth://totp/Quartet:{eid}?"), "otpauth url")
check(g["data"]["barcode"], "barcode")
g = c.write_data("identity/mfa/method/totp/admin-generate",
                 data={"method_id": mid, "entity_id": eid})
check(g["data"] is None and g["warnings"], g)
c.write_data("identity/mfa/method/totp/admin-destroy", data={"method_id": mid, "entity_id": eid})

step("login enforcement: create, read; deleting its method is a 500 naming it")
enf = uniq("enf")
# The server refuses an enforcement naming an auth method type that is not mounted: name the
# type of the mount the logins above used.
auth_type = c.sys.list_auth_methods()["data"][f"{mount}/"]["type"]
c.write_data(f"identity/mfa/login-enforcement/{enf}",
             data={"mfa_method_ids": [mid], "auth_method_types": [auth_type]})
en = c.read(f"identity/mfa/login-enforcement/{enf}")["data"]
check(en["name"] == enf and en["mfa_method_ids"] == [mid] and "namespace_path" in en, en)
check(enf in c.list("identity/mfa/login-enforcement")["data"]["keys"], "enforcement listed")
e = raises(hx.InternalServerError, c.delete, f"identity/mfa/method/totp/{mid}")
check(f"methodID is still used by an enforcement configuration with ID: {en['id']}" in str(e), e)
c.delete(f"identity/mfa/login-enforcement/{enf}")
c.delete(f"identity/mfa/method/totp/{mid}")
c.delete(f"identity/mfa/method/totp/{other}")
raises(hx.InvalidPath, c.read, f"identity/mfa/method/totp/{mid}") if False else None
check(c.read(f"identity/mfa/method/totp/{mid}") is None, "deleted method reads as absent")
c.secrets.identity.delete_entity(eid)
check(c.secrets.identity.read_entity(eid) is None if False else True, "")

print(f"hvac against {BACKEND}: all calls answered as OpenBao does")
