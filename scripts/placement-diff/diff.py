#!/usr/bin/python3
"""Differential check: the same requests against the real Placement 8.0.0
and Leasehold, each on a fresh SQLite database.

    scripts/placement-diff/diff.py [cases_edges|cases_uuid|cases_random]
    SEED=3 scripts/placement-diff/diff.py cases_random

Prints every difference in status, key headers (Content-Type, Allow,
Cache-Control, OpenStack-API-Version, Vary, Location, Last-Modified
presence) and JSON bodies (request ids ignored; trait lists compared as
sets, since upstream inserts the standard traits in hash order).

Needs the real Placement (../shared/conformance/placement/setup.sh full)
and a built binary: LEASEHOLD_BIN (default bin/leasehold). Known,
accepted differences: the SQL text inside upstream's "Update conflict:
(sqlite3.IntegrityError) …" message, and generated uuids in messages.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import urllib.error
import http.client

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get('SHARED_DIR', os.path.join(ROOT, '..', 'shared'))
REF_CMD = os.path.join(SHARED, 'conformance/placement/real-placement-server.sh') + ' {port} {db}'
OUR_CMD = (os.environ.get('LEASEHOLD_BIN', os.path.join(ROOT, 'bin/leasehold')) +
           ' serve --listen 127.0.0.1:0 --placement-listen 127.0.0.1:{port} --database sqlite:///{db} --auth noauth --log-level warn')


def free_port():
    import socket
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Server:
    def __init__(self, cmd, env=None):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix='diff-')
        db = os.path.join(self.dir, 'p.db')
        e = dict(os.environ)
        e.update(env or {})
        e['PLACEMENT_WSGI_SERVER'] = 'wsgiref'
        self.log = open(os.path.join(self.dir, 'log'), 'wb')
        self.proc = subprocess.Popen(['/bin/bash', '-c', cmd.format(port=self.port, db=db)],
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True, env=e)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                urllib.request.urlopen('http://127.0.0.1:%d/' % self.port, timeout=1).read()
                return
            except Exception:
                time.sleep(0.1)
        raise RuntimeError('server did not start: ' + cmd)

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        self.proc.wait(10)

    def call(self, method, path, headers, body):
        c = http.client.HTTPConnection('127.0.0.1', self.port, timeout=30)
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        data = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        c.close()
        return r.status, hdrs, data


def norm_body(data, port):
    try:
        j = json.loads(data)
    except Exception:
        return data.decode('utf-8', 'replace').replace(str(port), 'PORT')

    def walk(x):
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items() if k != 'request_id'}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x
    return walk(j)


def run(cases, env=None):
    ref = Server(REF_CMD, env)
    ours = Server(OUR_CMD, env)
    ndiff = 0
    try:
        for i, case in enumerate(cases):
            method, path = case[0], case[1]
            headers = {'x-auth-token': 'admin', 'accept': 'application/json'}
            headers.update(case[2] if len(case) > 2 and case[2] else {})
            body = case[3] if len(case) > 3 else None
            if body is not None and 'content-type' not in {k.lower() for k in headers}:
                headers['content-type'] = 'application/json'
            headers = {k: v for k, v in headers.items() if v is not None}
            rs, rh, rb = ref.call(method, path, headers, body)
            os_, oh, ob = ours.call(method, path, headers, body)
            diffs = []
            if rs != os_:
                diffs.append('status %s vs ours %s' % (rs, os_))
            for h in ('content-type', 'allow', 'cache-control', 'openstack-api-version', 'vary'):
                if rh.get(h) != oh.get(h):
                    diffs.append('header %s: %r vs ours %r' % (h, rh.get(h), oh.get(h)))
            for h in ('last-modified',):
                if (h in rh) != (h in oh):
                    diffs.append('header %s presence: %r vs ours %r' % (h, rh.get(h), oh.get(h)))
            if 'location' in rh or 'location' in oh:
                a = rh.get('location', '').replace(str(ref.port), 'PORT')
                b = oh.get('location', '').replace(str(ours.port), 'PORT')
                if a != b:
                    diffs.append('location %r vs ours %r' % (a, b))
            nb_r, nb_o = norm_body(rb, ref.port), norm_body(ob, ours.port)
            if path.startswith('/traits') and isinstance(nb_r, dict) and isinstance(nb_o, dict) and 'traits' in nb_r and 'traits' in nb_o:
                nb_r['traits'] = sorted(nb_r['traits']); nb_o['traits'] = sorted(nb_o['traits'])
            if nb_r != nb_o:
                diffs.append('body\n      ref:  %s\n      ours: %s' % (
                    json.dumps(nb_r, sort_keys=True)[:3000] if not isinstance(nb_r, str) else nb_r[:3000],
                    json.dumps(nb_o, sort_keys=True)[:3000] if not isinstance(nb_o, str) else nb_o[:3000]))
            if diffs:
                ndiff += 1
                print('#%d %s %s %s %s' % (i, method, path, json.dumps(case[2] if len(case) > 2 else {}),
                                          (body if isinstance(body, str) else json.dumps(body))[:200] if body is not None else ''))
                for d in diffs:
                    print('    ' + d)
    finally:
        ref.stop()
        ours.stop()
    print('%d cases, %d with differences' % (len(cases), ndiff))


if __name__ == '__main__':
    mod = sys.argv[1] if len(sys.argv) > 1 else 'cases_edges'
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    m = __import__(mod)
    run(m.CASES, getattr(m, 'ENV', None))
