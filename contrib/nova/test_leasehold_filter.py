# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.
"""Unit tests of LeaseholdFilter with Nova's fake HostState and a local
HTTP server playing Keystone (password tokens, a catalog) and Leasehold.

Run: cd contrib/nova && /usr/bin/python3 -m unittest -v test_leasehold_filter
(needs Debian's python3-nova, which ships nova.tests).
"""

import json
import logging
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from nova import objects
objects.register_all()  # before Nova objects and fakes are used
from nova.tests.unit.scheduler import fakes  # noqa: E402
from oslo_config import cfg  # noqa: E402

import leasehold_filter  # noqa: E402

CONF = cfg.CONF
TOKEN = 'gAAAA-service-token'


class Fake(object):
    """What the stub answers and what it saw; reset per test."""

    def __init__(self):
        self.calls = []        # (path, headers, body) of filter calls
        self.token_calls = 0
        self.status = 200
        self.answer = None     # a dict, or a function of the request body
        self.raw = None        # bytes sent instead of answer
        self.delay = 0.0
        self.lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    fake = None
    base = None

    def do_GET(self):
        # keystoneauth's password plugin discovers the identity version.
        if self.path.rstrip('/') == '/identity/v3':
            self._send(200, {'version': {
                'id': 'v3.14', 'status': 'stable',
                'updated': '2020-01-01T00:00:00Z',
                'links': [{'rel': 'self',
                           'href': self.base + '/identity/v3/'}],
                'media-types': [{
                    'base': 'application/json',
                    'type': 'application/vnd.openstack.identity-v3+json'}],
            }})
            return
        self._send(404, {'error': 'no such path %s' % self.path})

    def do_POST(self):
        n = int(self.headers.get('Content-Length') or 0)
        doc = json.loads(self.rfile.read(n) or b'{}')
        f = self.fake
        if self.path == '/identity/v3/auth/tokens':
            with f.lock:
                f.token_calls += 1
            self._send(201, _token_body(self.base), {'X-Subject-Token': TOKEN})
            return
        if self.path != '/v1/scheduler/filter':
            self._send(404, {'error': 'no such path %s' % self.path})
            return
        with f.lock:
            f.calls.append((self.path, dict(self.headers), doc))
        if f.delay:
            time.sleep(f.delay)
        if f.raw is not None:
            self._send_bytes(f.status, f.raw)
            return
        answer = f.answer(doc) if callable(f.answer) else f.answer
        self._send(f.status, answer)

    def _send(self, status, doc, headers=None):
        self._send_bytes(status, json.dumps(doc).encode(), headers)

    def _send_bytes(self, status, body, headers=None):
        try:
            self.send_response(status)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)

    def log_message(self, *args):
        pass


def _token_body(base):
    return {'token': {
        'methods': ['password'],
        'expires_at': '2999-01-01T00:00:00.000000Z',
        'issued_at': '2020-01-01T00:00:00.000000Z',
        'user': {'id': 'nova-uid', 'name': 'nova',
                 'domain': {'id': 'default', 'name': 'Default'}},
        'project': {'id': 'service-pid', 'name': 'service',
                    'domain': {'id': 'default', 'name': 'Default'}},
        'roles': [{'id': 'r1', 'name': 'service'}],
        'catalog': [{'type': 'reservation', 'name': 'leasehold', 'id': 's1',
                     'endpoints': [{'id': 'e1', 'interface': 'internal',
                                    'region': 'RegionOne',
                                    'region_id': 'RegionOne',
                                    'url': base + '/v1'}]}],
    }}


def leasehold(doc):
    """A small model of Leasehold's answer: reservation r-1 of project p1
    holds host1 and host2; host3 is in the free pool; others unknown."""
    held = {'r-1': ('p1', {'host1', 'host2'})}
    registered = {'host1', 'host2', 'host3'}
    hint = (doc.get('scheduler_hints') or {}).get('reservation')
    out, rejected = [], {}
    for name in doc['hosts']:
        if hint:
            owner, hosts = held.get(hint, (None, set()))
            ok = owner == doc['project_id'] and name in hosts
            reason = 'not a host of reservation %s' % hint
        else:
            ok = name not in registered
            reason = 'registered in Leasehold'
        if ok:
            out.append(name)
        else:
            rejected[name] = reason
    return {'hosts': out, 'rejected': rejected}


def spec(project='p1', hint=None, extra_specs=None, **kw):
    hints = {}
    if hint is not None:
        hints['reservation'] = [hint]
    hints.update(kw.pop('hints', {}))
    return objects.RequestSpec(
        project_id=project, user_id='u1', num_instances=1,
        scheduler_hints=hints,
        flavor=objects.Flavor(name='m1', flavorid='f1', vcpus=1,
                              memory_mb=512, root_gb=1,
                              extra_specs=extra_specs or {}), **kw)


def host(name, node=None):
    return fakes.FakeHostState(name, node or name, {})


class TestLeaseholdFilter(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.srv = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        cls.srv.daemon_threads = True
        cls.base = 'http://127.0.0.1:%d' % cls.srv.server_port
        Handler.base = cls.base
        threading.Thread(target=cls.srv.serve_forever, daemon=True).start()
        CONF([], project='nova')

    @classmethod
    def tearDownClass(cls):
        cls.srv.shutdown()
        cls.srv.server_close()

    def setUp(self):
        self.fake = Handler.fake = Fake()
        self.fake.answer = leasehold
        over = {'endpoint': self.base + '/v1', 'auth_type': 'password',
                'auth_url': self.base + '/identity/v3', 'username': 'nova',
                'password': 'secret', 'project_name': 'service',
                'user_domain_name': 'Default',
                'project_domain_name': 'Default', 'fail_open': False}
        for k, v in over.items():
            CONF.set_override(k, v, group='leasehold')
        self.addCleanup(CONF.clear_override, 'timeout', group='leasehold')
        for k in over:
            self.addCleanup(CONF.clear_override, k, group='leasehold')
        self.filt = leasehold_filter.LeaseholdFilter()

    def run_filter(self, hosts, spec_obj):
        return [h.host for h in self.filt.filter_all(hosts, spec_obj)]

    def test_one_call_per_request_with_service_token(self):
        hosts = [host('host%d' % i) for i in range(1, 6)]
        self.assertEqual(['host1', 'host2'],
                         self.run_filter(hosts, spec(hint='r-1')))
        self.assertTrue(self.filt.run_filter_once_per_request)
        self.assertEqual(1, len(self.fake.calls))
        path, headers, body = self.fake.calls[0]
        self.assertEqual(TOKEN, headers.get('X-Auth-Token'))
        self.assertEqual('p1', body['project_id'])
        self.assertEqual('u1', body['user_id'])
        self.assertEqual('r-1', body['scheduler_hints']['reservation'])
        self.assertEqual(['host1', 'host2', 'host3', 'host4', 'host5'],
                         body['hosts'])
        # The session is reused: one token for two requests.
        self.run_filter(hosts, spec())
        self.assertEqual(2, len(self.fake.calls))
        self.assertEqual(1, self.fake.token_calls)

    def test_no_hint_passes_only_unmanaged_hosts(self):
        hosts = [host('host1'), host('host3'), host('host9')]
        self.assertEqual(['host9'], self.run_filter(hosts, spec()))
        body = self.fake.calls[0][2]
        self.assertNotIn('reservation', body['scheduler_hints'])

    def test_other_project_gets_nothing(self):
        hosts = [host('host1'), host('host2')]
        self.assertEqual([], self.run_filter(hosts, spec(project='p2',
                                                         hint='r-1')))

    def test_flavor_extra_specs_and_node_names_sent(self):
        specs = {'resources:CUSTOM_RESERVATION_R_1': '1',
                 'hw:cpu_policy': 'dedicated'}
        hosts = [host('svc', node='node-a'), host('svc', node='node-b')]
        self.fake.answer = {'hosts': ['node-b'], 'rejected': {'node-a': 'x'}}
        got = list(self.filt.filter_all(hosts, spec(extra_specs=specs)))
        self.assertEqual(['node-b'], [h.nodename for h in got])
        body = self.fake.calls[0][2]
        self.assertEqual(specs, body['flavor']['extra_specs'])
        self.assertEqual(['node-a', 'node-b'], body['hosts'])

    def test_rejections_logged_at_debug_with_explain(self):
        log = logging.getLogger(leasehold_filter.__name__)
        with self.assertLogs(log, level='DEBUG') as logs:
            self.run_filter([host('host1'), host('host9')], spec())
        self.assertIn('host host1 rejected: registered in Leasehold',
                      '\n'.join(logs.output))
        self.assertTrue(self.fake.calls[0][2]['explain'])

    def test_no_explain_when_not_debugging(self):
        log = logging.getLogger(leasehold_filter.__name__)
        old = log.level
        log.setLevel(logging.INFO)
        self.addCleanup(log.setLevel, old)
        self.run_filter([host('host9')], spec())
        self.assertFalse(self.fake.calls[0][2]['explain'])

    def test_rebuild_is_not_filtered(self):
        hosts = [host('host1'), host('host3')]
        s = spec(hints={'_nova_check_type': ['rebuild']})
        self.assertEqual(['host1', 'host3'], self.run_filter(hosts, s))
        self.assertEqual([], self.fake.calls)

    def test_host_passes(self):
        self.assertTrue(self.filt.host_passes(host('host1'),
                                              spec(hint='r-1')))
        self.assertFalse(self.filt.host_passes(host('host3'),
                                               spec(hint='r-1')))

    def test_catalog_endpoint_when_none_configured(self):
        CONF.set_override('endpoint', None, group='leasehold')
        self.assertEqual(['host1'],
                         self.run_filter([host('host1')], spec(hint='r-1')))
        self.assertEqual(1, len(self.fake.calls))

    def _failures(self):
        """Every way Leasehold can fail to answer, as a setup function."""
        def status(code):
            def f():
                self.fake.status = code
                self.fake.answer = {'error_code': code,
                                    'error_message': 'no'}
            return f

        def raw(b):
            def f():
                self.fake.raw = b
            return f

        def unreachable():
            CONF.set_override('endpoint', 'http://127.0.0.1:9/v1',
                              group='leasehold')

        def missing_option():
            CONF.set_override('auth_url', None, group='leasehold')

        def slow():
            CONF.set_override('timeout', 1, group='leasehold')
            self.fake.delay = 3

        return {'500': status(500), '403': status(403),
                'not JSON': raw(b'<html>'), 'no hosts key': raw(b'{}'),
                'hosts not a list': raw(b'{"hosts": "host1"}'),
                'unreachable': unreachable, 'bad config': missing_option,
                'timeout': slow}

    def test_fail_closed_by_default(self):
        for name, setup in self._failures().items():
            with self.subTest(name):
                self.setUp()
                setup()
                with self.assertLogs(leasehold_filter.LOG.name,
                                     level='ERROR'):
                    got = self.run_filter([host('host1'), host('host9')],
                                          spec())
                self.assertEqual([], got)

    def test_fail_open(self):
        for name, setup in self._failures().items():
            with self.subTest(name):
                self.setUp()
                CONF.set_override('fail_open', True, group='leasehold')
                setup()
                with self.assertLogs(leasehold_filter.LOG.name,
                                     level='WARNING') as logs:
                    got = self.run_filter([host('host1'), host('host9')],
                                          spec())
                self.assertEqual(['host1', 'host9'], got)
                self.assertIn('passing all 2 hosts (fail_open)',
                              '\n'.join(logs.output))

    def test_options_listed(self):
        (group, opts), = leasehold_filter.list_opts()
        names = {o.name for o in opts}
        self.assertEqual('leasehold', group)
        for want in ('endpoint', 'fail_open', 'timeout', 'auth_type',
                     'auth-url', 'username', 'password', 'cafile'):
            self.assertIn(want, names)
        fail_open = [o for o in opts if o.name == 'fail_open'][0]
        self.assertIs(False, fail_open.default)
        self.assertEqual(10, CONF.leasehold.timeout)


if __name__ == '__main__':
    unittest.main()
