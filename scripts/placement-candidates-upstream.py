#!/usr/bin/python3
"""Record the real Placement 8.0.0's answers to GET /allocation_candidates.

For every upstream gabbi fixture used by the allocation-candidates tests,
start Debian's placement-api (real-placement-server.sh) on a fresh SQLite
database, rebuild the fixture over HTTP (http_fixtures.py), and replay
every GET /allocation_candidates of the gabbit files using that fixture
plus a set of generated queries. Writes OUT/cases.json and keeps each
fixture's database as OUT/<fixture>.sqlite, so that
pkg/placement's TestCandidatesAgainstUpstreamDump can compute the same
queries with Leasehold's engine on the very same data and compare.

Usage: scripts/placement-candidates-upstream.py OUTDIR
Needs: setup.sh full (placement-api, gabbi, yaml).
"""
import itertools
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

# The conformance suite in the shared directory beside the checkout.
CONF = os.environ.get('PLACEMENT_CONFORMANCE', os.path.join(
    os.path.dirname(os.path.abspath(__file__)), '..', '..', 'shared', 'conformance', 'placement'))
sys.path.insert(0, CONF)
import http_fixtures  # noqa: E402
import yaml  # noqa: E402

FIXTURES = ['SharedStorageFixture', 'NUMAAggregateFixture',
            'NUMANetworkFixture', 'DeepNUMANetworkFixture',
            'NonSharedStorageFixture', 'GranularFixture',
            'NeutronQoSMultiSegmentFixture']


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    p = s.getsockname()[1]
    s.close()
    return p


def subst(val, env):
    if isinstance(val, str):
        for k, v in env.items():
            val = val.replace("$ENVIRON['%s']" % k, v)
            val = val.replace('$ENVIRON["%s"]' % k, v)
        return val
    if isinstance(val, list):
        return [subst(v, env) for v in val]
    return val


def gabbit_queries(fixture, env):
    out = []
    for name in sorted(os.listdir(os.path.join(CONF, 'gabbits'))):
        if not name.endswith('.yaml'):
            continue
        with open(os.path.join(CONF, 'gabbits', name)) as f:
            data = yaml.safe_load(f)
        if fixture not in (data.get('fixtures') or []):
            continue
        dh = (data.get('defaults') or {}).get('request_headers') or {}
        for t in data.get('tests', []):
            path = t.get('GET') or (t.get('url') if t.get('method', 'GET') == 'GET' else None)
            if not path or not path.startswith('/allocation_candidates'):
                continue
            hdrs = dict(dh)
            hdrs.update(t.get('request_headers') or {})
            if hdrs.get('x-auth-token') != 'admin':
                continue
            mv = hdrs.get('openstack-api-version', 'placement 1.0').split()[-1]
            path = ''.join(subst(path, env).split())
            q = path.split('?', 1)[1] if '?' in path else ''
            qp = t.get('query_parameters')
            if qp:
                pairs = []
                for k, v in qp.items():
                    for x in (v if isinstance(v, list) else [v]):
                        pairs.append((k, subst(str(x), env)))
                extra = urllib.parse.urlencode(pairs)
                q = q + '&' + extra if q else extra
            out.append({'source': '%s::%s' % (name, t.get('name')),
                        'mv': mv, 'query': q})
    return out


def generated_queries(env, rnd, n):
    """Random queries over the fixture's classes, traits and aggregates."""
    classes = ['VCPU', 'MEMORY_MB', 'DISK_GB', 'SRIOV_NET_VF', 'VGPU',
               'CUSTOM_NET_MBPS', 'CUSTOM_FPGA', 'CUSTOM_VF',
               'NET_BW_EGR_KILOBIT_PER_SEC']
    traits = ['HW_CPU_X86_AVX', 'HW_CPU_X86_AVX2', 'HW_CPU_X86_SSE',
              'CUSTOM_FOO', 'CUSTOM_DISK_SSD', 'HW_NUMA_ROOT',
              'CUSTOM_PHYSNET1', 'CUSTOM_PHYSNET2', 'HW_CPU_X86_MMX',
              'CUSTOM_VNIC_TYPE_DIRECT', 'COMPUTE_VOLUME_MULTI_ATTACH',
              'MISC_SHARES_VIA_AGGREGATE', 'CUSTOM_HW_NIC_ROOT']
    aggs = [v for k, v in sorted(env.items()) if k.startswith('AGG')]
    rps = [v for k, v in sorted(env.items())
           if k.endswith('_UUID') and not k.startswith('AGG') and
           len(v) == 36 and k not in ('PROJECT_ID', 'USER_ID')]
    amounts = {'VCPU': [1, 2, 4], 'MEMORY_MB': [256, 512, 1024],
               'DISK_GB': [10, 100, 1500], 'SRIOV_NET_VF': [1, 2, 8],
               'VGPU': [1, 2], 'CUSTOM_NET_MBPS': [100, 5000],
               'CUSTOM_FPGA': [1], 'CUSTOM_VF': [1, 2],
               'NET_BW_EGR_KILOBIT_PER_SEC': [100, 5000]}
    out = []
    for i in range(n):
        mv = rnd.choice(['1.12', '1.24', '1.28', '1.29', '1.33', '1.36',
                         '1.39'])
        minor = int(mv.split('.')[1])
        pairs = []
        ngroups = rnd.choice([1, 1, 2, 3]) if minor >= 25 else 1
        sufs = []
        for g in range(ngroups):
            suf = '' if g == 0 and rnd.random() < 0.6 else (
                '_G%d' % g if minor >= 33 else str(g + 1))
            if suf in sufs:
                continue
            sufs.append(suf)
            res = rnd.sample(classes, rnd.choice([1, 1, 2, 3]))
            pairs.append(('resources' + suf, ','.join(
                '%s:%d' % (c, rnd.choice(amounts[c])) for c in res)))
            if rnd.random() < 0.35:
                ts = rnd.sample(traits, rnd.choice([1, 2]))
                if minor >= 22 and rnd.random() < 0.3:
                    ts[0] = '!' + ts[0]
                pairs.append(('required' + suf, ','.join(ts)))
            if minor >= 39 and rnd.random() < 0.2:
                pairs.append(('required' + suf,
                              'in:' + ','.join(rnd.sample(traits, 2))))
            if aggs and minor >= 21 and rnd.random() < 0.3:
                a = rnd.choice(aggs)
                if minor >= 32 and rnd.random() < 0.3:
                    a = '!' + a
                pairs.append(('member_of' + suf, a))
            if rps and minor >= 31 and rnd.random() < 0.15:
                pairs.append(('in_tree' + suf, rnd.choice(rps)))
        granular = [s for s in sufs if s]
        if minor >= 25 and (len(granular) > 1 or rnd.random() < 0.3):
            pairs.append(('group_policy', rnd.choice(['none', 'isolate'])))
        if minor >= 36 and len(granular) >= 2 and rnd.random() < 0.4:
            pairs.append(('same_subtree', ','.join(granular)))
        if minor >= 35 and rnd.random() < 0.15:
            pairs.append(('root_required', rnd.choice(
                ['COMPUTE_VOLUME_MULTI_ATTACH', '!CUSTOM_FOO',
                 'HW_CPU_X86_AVX'])))
        out.append({'source': 'generated-%d' % i, 'mv': mv,
                    'query': urllib.parse.urlencode(pairs)})
    return out


def get(url, mv):
    req = urllib.request.Request(url, headers={
        'x-auth-token': 'admin', 'accept': 'application/json',
        'openstack-api-version': 'placement %s' % mv})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read() or b'null')
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b'null')


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rnd = random.Random(int(os.environ.get('SEED', '42')))
    ngen = int(os.environ.get('GENERATED', '150'))
    cases = []
    for fx in FIXTURES:
        port = free_port()
        work = os.path.join(out, 'work-' + fx)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        dbp = os.path.join(work, 'db.sqlite')
        proc = subprocess.Popen(
            [os.path.join(CONF, 'real-placement-server.sh'), str(port), dbp],
            stdout=open(os.path.join(work, 'server.log'), 'w'),
            stderr=subprocess.STDOUT, start_new_session=True)
        try:
            base = 'http://127.0.0.1:%d' % port
            for _ in range(300):
                try:
                    urllib.request.urlopen(base + '/', timeout=2)
                    break
                except Exception:
                    time.sleep(0.2)
            b = http_fixtures.Builder(http_fixtures.Client(base))
            env = http_fixtures.FIXTURES[fx][0](b)
            qs = gabbit_queries(fx, env) + generated_queries(env, rnd, ngen)
            for c in qs:
                st, body = get(base + '/allocation_candidates?' + c['query'],
                               c['mv'])
                c.update(fixture=fx, status=st, body=body)
                cases.append(c)
        finally:
            os.killpg(proc.pid, 15)
            proc.wait()
        shutil.copy(dbp, os.path.join(out, fx + '.sqlite'))
        print('%s: %d queries' % (fx, len(qs)), flush=True)
    with open(os.path.join(out, 'cases.json'), 'w') as f:
        json.dump(cases, f, indent=1)


if __name__ == '__main__':
    main()
