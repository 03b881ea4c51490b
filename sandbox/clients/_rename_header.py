"""What a user of a real client does to talk to a sandbox service whose token header is renamed
(X-Secrets-Token, X-Catalog-Token): mount a requests adapter that renames the client's header
(X-Vault-Token, X-Consul-Token) on the way out. Nothing else about the request changes.
"""

import requests
from requests.adapters import HTTPAdapter


class RenameHeader(HTTPAdapter):
    def __init__(self, old, new, **kw):
        self.old, self.new = old, new
        super().__init__(**kw)

    def send(self, request, **kw):
        if self.old != self.new and self.old in request.headers:
            request.headers[self.new] = request.headers.pop(self.old)
        return super().send(request, **kw)


def session(old, new):
    s = requests.Session()
    a = RenameHeader(old, new)
    s.mount("http://", a)
    s.mount("https://", a)
    return s
