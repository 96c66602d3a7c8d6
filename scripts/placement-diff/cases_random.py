import json
import random

import os
R = random.Random(int(os.environ.get("SEED", "7")))
RPS = ['11111111-2222-3333-4444-555555555555', 'aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee',
       '33333333-2222-3333-4444-555555555555']
AGGS = ['99999999-0000-4000-8000-000000000001', '99999999-0000-4000-8000-000000000002']
CLASSES = ['VCPU', 'MEMORY_MB', 'DISK_GB', 'CUSTOM_GOLD', 'HOUSE', 'vcpu']
TRAITS = ['HW_CPU_X86_AVX', 'HW_CPU_X86_SSE', 'CUSTOM_A', 'CUSTOM_B', 'NOPE']
MVS = ['1.0', '1.1', '1.3', '1.4', '1.6', '1.14', '1.15', '1.18', '1.19', '1.22', '1.23', '1.24', '1.26', '1.32', '1.38', '1.39']


def mv():
    return {'openstack-api-version': 'placement %s' % R.choice(MVS)}


def val():
    return R.choice([0, 1, 2, 5, 10, 100, -1, 2147483647, 2147483648, 1.0, 1.5, 'x', None, True, 1e40])


def inv():
    d = {}
    for k in ['total', 'reserved', 'min_unit', 'max_unit', 'step_size', 'allocation_ratio']:
        if R.random() < (0.9 if k == 'total' else 0.3):
            d[k] = val() if R.random() < 0.3 else R.choice([1, 2, 4, 8, 16, 64])
    if R.random() < 0.05:
        d['junk'] = 1
    return d


def gen():
    return R.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 'x'])


def qs():
    parts = []
    for _ in range(R.randint(0, 3)):
        k = R.choice(['name', 'uuid', 'member_of', 'resources', 'in_tree', 'required', 'foo'])
        if k == 'member_of':
            v = R.choice([AGGS[0], '!' + AGGS[1], 'in:%s,%s' % tuple(AGGS), 'bad', '!in:' + AGGS[0]])
        elif k == 'resources':
            v = ','.join('%s:%s' % (R.choice(CLASSES), R.choice([1, 2, 8, 0, 'x', 100]))
                         for _ in range(R.randint(1, 2)))
        elif k in ('uuid', 'in_tree'):
            v = R.choice(RPS + ['bad'])
        elif k == 'required':
            v = R.choice(['HW_CPU_X86_AVX', '!HW_CPU_X86_SSE', 'in:CUSTOM_A,HW_CPU_X86_AVX', 'NOPE', 'CUSTOM_A,!CUSTOM_B', ''])
        else:
            v = R.choice(['a', 'b', ''])
        parts.append('%s=%s' % (k, v))
    return '&'.join(parts)


CASES = []
for u in RPS[:2]:
    CASES.append(('POST', '/resource_providers', {'openstack-api-version': 'placement 1.20'}, {'name': u[:4], 'uuid': u}))
CASES.append(('PUT', '/traits/CUSTOM_A', {'openstack-api-version': 'placement 1.6'}))
CASES.append(('PUT', '/resource_classes/CUSTOM_GOLD', {'openstack-api-version': 'placement 1.7'}))
for _ in range(400):
    rp = R.choice(RPS)
    op = R.randint(0, 12)
    if op == 0:
        CASES.append(('POST', '/resource_providers/%s/inventories' % rp, mv(), dict(inv(), resource_class=R.choice(CLASSES))))
    elif op == 1:
        CASES.append(('PUT', '/resource_providers/%s/inventories' % rp, mv(),
                      {'resource_provider_generation': gen(),
                       'inventories': {R.choice(CLASSES): inv() for _ in range(R.randint(0, 3))}}))
    elif op == 2:
        CASES.append(('PUT', '/resource_providers/%s/inventories/%s' % (rp, R.choice(CLASSES)), mv(),
                      dict(inv(), resource_provider_generation=gen())))
    elif op == 3:
        CASES.append(('DELETE', '/resource_providers/%s/inventories/%s' % (rp, R.choice(CLASSES)), mv()))
    elif op == 4:
        CASES.append(('DELETE', '/resource_providers/%s/inventories' % rp, mv()))
    elif op == 5:
        CASES.append(('GET', '/resource_providers/%s/inventories' % rp, mv()))
    elif op == 6:
        CASES.append(('PUT', '/resource_providers/%s/traits' % rp, mv(),
                      {'traits': R.sample(TRAITS, R.randint(0, 2)), 'resource_provider_generation': gen()}))
    elif op == 7:
        if R.random() < 0.5:
            body = R.sample(AGGS, R.randint(0, 2))
        else:
            body = {'aggregates': R.sample(AGGS, R.randint(0, 2)), 'resource_provider_generation': gen()}
        CASES.append(('PUT', '/resource_providers/%s/aggregates' % rp, mv(), body))
    elif op == 8:
        CASES.append(('GET', '/resource_providers?' + qs(), mv()))
    elif op == 9:
        CASES.append(('GET', '/resource_providers/%s/%s' % (rp, R.choice(['traits', 'aggregates', 'inventories/VCPU'])), mv()))
    elif op == 10:
        CASES.append(('DELETE', '/resource_providers/%s/traits' % rp, mv()))
    elif op == 11:
        CASES.append(('GET', '/traits?' + R.choice(['associated=true', 'associated=false', 'name=in:CUSTOM_A,CUSTOM_B', 'name=startswith:CUSTOM']), mv()))
    else:
        CASES.append(('GET', '/resource_providers/%s' % rp, mv()))
