#!/usr/bin/python3
"""Generate query_golden.json for the query-string parser tests.

Runs the real Placement 8.0.0 code (Debian 12 python3-placement, with
python3-webob and python3-oslo.utils) on a corpus of inputs: hand-picked
cases plus seeded random ones. Run from pkg/placement:

    PYTHONHASHSEED=0 /usr/bin/python3 testdata/gen_query_golden.py > testdata/query_golden.json

Go tests only read the JSON. Where upstream's message depends on Python
set iteration order (hash-randomised in production), every acceptable
message is listed in "alts".
"""
import itertools
import json
import random
import sys

import webob
from oslo_utils import uuidutils

from placement import lib
from placement import microversion
from placement import util

import microversion_parse

RNG = random.Random(20261121)

U1 = '11111111-2222-3333-4444-555555555555'
U2 = 'aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee'
U3 = 'AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE'


def err_text(exc):
    return str(exc)


def rand_from(tokens, n):
    return ''.join(RNG.choice(tokens) for _ in range(RNG.randint(0, n)))


# ---- resources ----------------------------------------------------------

def resources_case(qs):
    try:
        res = util.normalize_resources_qs_param(qs)
    except webob.exc.HTTPBadRequest as exc:
        return {'in': qs, 'err': err_text(exc)}
    return {'in': qs, 'ok': [[k, str(v)] for k, v in res.items()]}


RES_FIXED = [
    '', ' ', '\t', 'VCPU:1', 'VCPU:1,MEMORY_MB:1024', 'VCPU:0', 'VCPU:-2',
    'VCPU', 'VCPU:1:2', 'VCPU:', ':1', 'VCPU:one', 'VCPU: 3 ', 'VCPU:+3',
    'VCPU:1_000', 'VCPU:1__0', 'VCPU:_1', 'VCPU:\u0663', 'VCPU:\uff11\uff12',
    'VCPU:1,VCPU:2', 'VCPU:1,DISK_GB:2,VCPU:3', 'VCPU:1,', ',VCPU:1',
    'VCPU :1', 'vcpu:1', 'VCPU:99999999999999999999999',
    'VCPU:-99999999999999999999999', 'VCPU:1.0', 'VCPU:1e3', 'VCPU:0x10',
    'VCPU:-0', 'VCPU:00012', 'CUSTOM_X:1,,VCPU:1', 'VCPU:1\n',
    'VCPU:\u00a01', 'VCPU:\x1c1\x1f',
]

RES_TOKENS = ['VCPU', 'DISK_GB', 'CUSTOM_A', ':', ':', ',', '1', '2', '0',
              '-', '+', ' ', '_', '\u0663', 'x', '12', '\t']

# ---- required -----------------------------------------------------------

def traits_case(val, allow_forbidden, allow_any):
    case = {'in': val, 'allow_forbidden': allow_forbidden,
            'allow_any': allow_any}
    try:
        required, forbidden = util.normalize_traits_qs_param(
            val, allow_forbidden=allow_forbidden, allow_any_traits=allow_any)
    except webob.exc.HTTPBadRequest as exc:
        case['err'] = err_text(exc)
        return case
    case['ok'] = {'any': [sorted(s) for s in required],
                  'forbidden': sorted(forbidden)}
    return case


TRAITS_FIXED = [
    '', 'A', 'A,B', 'A,,B', ',', ' A , B ', '!A', 'A,!B', '!!B', '!',
    '!,A', 'A,!', 'in:A,B', 'in:', 'in:A,', 'in: A , B', 'in:A,!B',
    'in:!A', 'in:A,A', 'IN:A', 'in:A,in:B', '!in:A', 'A,A', '!A,!A', 'A,!A',
    '\u00a0A\u00a0', 'A\x1f', 'in: ', '!A, ', ' !A',
]

TRAIT_TOKENS = ['A', 'B', 'HW_X', ',', ',', '!', '!', ' ', 'in:', ':', '\t',
                '\u3000']

# ---- member_of ----------------------------------------------------------

def member_of_case(value):
    case = {'in': value}
    try:
        required, forbidden = util.normalize_member_of_qs_param(value)
    except webob.exc.HTTPBadRequest as exc:
        msg = err_text(exc)
        if 'Expected \'member_of\' parameter to contain valid UUID' in msg:
            # The reported bad value is the first in set order.
            if value.startswith('!in:'):
                vals = value[4:].split(',')
            elif value.startswith('!'):
                vals = [value[1:]]
            elif value.startswith('in:'):
                vals = value[3:].split(',')
            else:
                vals = [value]
            alts = sorted(set(
                "Invalid query string parameters: Expected 'member_of' "
                "parameter to contain valid UUID(s). Got: %s" % v
                for v in vals if not uuidutils.is_uuid_like(v)))
            case['alts'] = alts
        else:
            case['err'] = msg
        return case
    case['ok'] = {'req': sorted(required), 'forb': sorted(forbidden)}
    return case


MO_FIXED = [
    U1, '!' + U1, 'in:' + U1, 'in:%s,%s' % (U1, U2), '!in:%s,%s' % (U1, U2),
    '%s,%s' % (U1, U2), '', '!', 'in:', '!in:', 'x', 'in:x,' + U1,
    'in:%s,x,y' % U1, U1.replace('-', ''), '{%s}' % U1, 'urn:uuid:' + U1,
    U3, '!!' + U1, 'in:%s,%s' % (U1, U1), 'IN:' + U1, 'in:' + U1 + ',',
    ' ' + U1, U1 + ' ',
]

# ---- in_tree / uuid -----------------------------------------------------

UUIDS = [
    U1, U3, U1.replace('-', ''), '{%s}' % U1, '{{%s}}' % U1, 'urn:uuid:' + U1,
    'uuid:' + U1, 'urn:' + U1, U1[:-1], U1 + '0', '', ' ' + U1, U1 + ' ',
    '1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1',
    '+' + U1[1:], '0x' + U1[2:], U1.replace('1', 'g'), 'urn:urn:' + U1,
    '{' + U1, U1 + '}', '%s-' % U1, '-' + U1, '\u0663' + U1[1:],
    U1.replace('-', '_'), '11111111-2222-3333-4444-55555555555\u00e9',
    'uuid:{%s}' % U1, '{urn:uuid:%s}' % U1,
]


def uuid_case(value):
    case = {'in': value, 'like': uuidutils.is_uuid_like(value)}
    try:
        case['in_tree'] = util.normalize_in_tree_qs_params(value)
    except webob.exc.HTTPBadRequest as exc:
        case['in_tree_err'] = err_text(exc)
    return case


# ---- whole requests -----------------------------------------------------

def make_req(qs, mv):
    req = webob.Request.blank('/?' + qs)
    version = microversion_parse.Version(*[int(x) for x in mv.split('.')])
    # As placement's middleware does: matches() compares against these.
    version.max_version = microversion_parse.parse_version_string(
        microversion.max_version_string())
    version.min_version = microversion_parse.parse_version_string(
        microversion.min_version_string())
    req.environ[microversion.MICROVERSION_ENVIRON] = version
    return req


def group_dict(g):
    return {
        'use_same_provider': g.use_same_provider,
        'resources': [[k, str(v)] for k, v in g.resources.items()],
        'required': [sorted(s) for s in g.required_traits],
        'forbidden': sorted(g.forbidden_traits),
        'member_of': [sorted(s) for s in g.member_of],
        'forbidden_aggs': sorted(g.forbidden_aggs),
        'in_tree': g.in_tree,
    }


def request_case(qs, mv, same_subtrees=None):
    case = {'qs': qs, 'mv': mv}
    req = make_req(qs, mv)
    try:
        case['items'] = [[k, v] for k, v in req.GET.items()]
    except UnicodeDecodeError as exc:
        case['items_err'] = str(exc)
        return case
    try:
        req_aggs, forb_aggs = util.normalize_member_of_qs_params(req)
        case['member_of'] = {'any': [sorted(s) for s in req_aggs],
                             'forbidden': sorted(forb_aggs)}
    except webob.exc.HTTPBadRequest as exc:
        case['member_of_err'] = err_text(exc)
    try:
        req_t, forb_t = util.normalize_traits_qs_params(req)
        case['required'] = {'any': [sorted(s) for s in req_t],
                            'forbidden': sorted(forb_t)}
    except webob.exc.HTTPBadRequest as exc:
        case['required_err'] = err_text(exc)
    if same_subtrees is not None:
        case['same_subtrees'] = [sorted(s) for s in same_subtrees]
        params = lib.RequestWideParams(
            same_subtrees=[set(s) for s in same_subtrees])
        try:
            groups = lib.RequestGroup.dict_from_request(req, params)
            case['groups'] = [[k, group_dict(g)] for k, g in groups.items()]
        except webob.exc.HTTPBadRequest as exc:
            msg = err_text(exc)
            alts = {msg}
            # Messages that list a set's members in set order.
            for marker in ('bad group(s) - ', 'Real suffixes should be'):
                if marker in msg:
                    alts |= permuted_list_messages(msg)
            case['groups_alts'] = sorted(alts)
            case['groups_code'] = exc.comment
    return case


def permuted_list_messages(msg):
    """Every message obtained by permuting the first Python list in msg."""
    start = msg.find('[')
    end = msg.find(']', start)
    if start < 0 or end < 0:
        return {msg}
    try:
        items = eval(msg[start:end + 1])  # a list of str literals
    except Exception:  # noqa
        return {msg}
    if len(items) > 5:
        return {msg}
    return {msg[:start] + repr(list(p)) + msg[end + 1:]
            for p in itertools.permutations(items)}


REQ_FIXED = [
    ('', '1.39'), ('member_of=' + U1, '1.3'),
    ('member_of=%s&member_of=%s' % (U1, U2), '1.23'),
    ('member_of=%s&member_of=%s' % (U1, U2), '1.24'),
    ('member_of=!' + U1, '1.31'), ('member_of=!' + U1, '1.32'),
    ('member_of=in:%s,%s&member_of=!in:%s' % (U1, U2, U3), '1.39'),
    ('required=A&required=B', '1.38'), ('required=A&required=B', '1.39'),
    ('required=!A', '1.21'), ('required=!A', '1.22'),
    ('required=in:A,B', '1.38'), ('required=in:A,B&required=!C', '1.39'),
    ('required=A;required=B', '1.39'), ('a=1&&b=2', '1.39'),
    ('a+b=c+d', '1.39'), ('a=%41%2c', '1.39'), ('a=%zz', '1.39'),
    ('a=%ff', '1.39'), ('%ff=1', '1.39'), ('a=%e2%82', '1.39'),
    ('a=%c3%28', '1.39'), ('a', '1.39'), ('=v', '1.39'), ('a==b', '1.39'),
    ('a=1&a=2&b=3&a=4', '1.39'), ('a=%E2%9C%93', '1.39'),
]

GROUP_FIXED = [
    ('resources=VCPU:1', '1.25', []),
    ('resources=VCPU:1&required=A', '1.25', []),
    ('required=A', '1.25', []),
    ('member_of=' + U1, '1.25', []),
    ('resources1=VCPU:1&required2=A', '1.25', []),
    ('resources1=VCPU:1&member_of2=' + U1, '1.25', []),
    ('resources_X=VCPU:1', '1.25', []),
    ('resources_X=VCPU:1', '1.33', []),
    ('resources=VCPU:1&resources1=VCPU:2&required1=!A&required1=A', '1.39', []),
    ('resources=VCPU:1&required=A,!A', '1.22', []),
    ('resources=VCPU:1&required=A,!A', '1.21', []),
    ('resources=VCPU:1&required=in:A,B&required=!A,!B', '1.39', []),
    ('resources=VCPU:1&required=in:A,B&required=!A', '1.39', []),
    ('resources1=VCPU:1&required2=A', '1.36', [['1', '2']]),
    ('resources1=VCPU:1&required2=A', '1.36', []),
    ('resources1=VCPU:1&required2=A&required3=B', '1.36', []),
    ('resources1=VCPU:1', '1.36', [['1', '9']]),
    ('resources1=VCPU:1', '1.36', [['1', '9', '8']]),
    ('required1=A', '1.36', [['1']]),
    ('', '1.36', []), ('', '1.35', []),
    ('resources=VCPU:1&in_tree=' + U1, '1.31', []),
    ('resources=VCPU:1&in_tree=x', '1.31', []),
    ('resources=VCPU:1&in_tree=%20' + U1, '1.31', []),
    ('resources=VCPU:1&resources=DISK_GB:2', '1.31', []),
    ('resources=VCPU:x&required=!A', '1.21', []),
    ('resources=VCPU:1&member_of=%s&member_of=%s' % (U1, U2), '1.23', []),
    ('resources0=VCPU:1', '1.25', []),
    ('resources01=VCPU:1', '1.25', []),
    ('resources' + 'x' * 64 + '=VCPU:1', '1.33', []),
    ('resources' + 'x' * 65 + '=VCPU:1', '1.33', []),
]


def main():
    out = {'resources': [], 'traits': [], 'member_of': [], 'uuid': [],
           'requests': [], 'groups': []}
    for qs in RES_FIXED:
        out['resources'].append(resources_case(qs))
    for _ in range(400):
        out['resources'].append(resources_case(rand_from(RES_TOKENS, 10)))
    for val in TRAITS_FIXED:
        for af, aa in itertools.product([False, True], repeat=2):
            out['traits'].append(traits_case(val, af, aa))
    for _ in range(400):
        val = rand_from(TRAIT_TOKENS, 8)
        af, aa = RNG.choice([False, True]), RNG.choice([False, True])
        out['traits'].append(traits_case(val, af, aa))
    for v in MO_FIXED:
        out['member_of'].append(member_of_case(v))
    mo_tokens = [U1, U2, U3, ',', ',', '!', 'in:', '!in:', 'x', ' ', '-']
    for _ in range(300):
        out['member_of'].append(member_of_case(rand_from(mo_tokens, 5)))
    for v in UUIDS:
        out['uuid'].append(uuid_case(v))
    for qs, mv in REQ_FIXED:
        out['requests'].append(request_case(qs, mv))
    req_tokens = ['member_of=', 'required=', 'a=', '&', '&', ';', U1, U2,
                  '!', 'in:', 'A', 'B', ',', '%20', '+', '%ff', '=']
    for _ in range(300):
        mv = RNG.choice(['1.3', '1.18', '1.22', '1.24', '1.32', '1.38',
                         '1.39'])
        out['requests'].append(request_case(rand_from(req_tokens, 10), mv))
    for qs, mv, ss in GROUP_FIXED:
        out['groups'].append(request_case(qs, mv, ss))
    grp_tokens = ['resources', 'required', 'member_of', 'in_tree', '1', '2',
                  '_X', '=', '=', 'VCPU:1', 'DISK_GB:2', 'A', '!B', 'in:A,C',
                  U1, '&', '&', ',', 'x']
    for _ in range(400):
        mv = RNG.choice(['1.25', '1.31', '1.33', '1.36', '1.39'])
        ss = RNG.choice([[], [['1']], [['1', '2']], [['_X', '9']]])
        out['groups'].append(request_case(rand_from(grp_tokens, 12), mv, ss))
    # One case per line keeps the file small and diffs readable.
    sys.stdout.write('{\n')
    for i, key in enumerate(sorted(out)):
        sys.stdout.write(' %s: [\n' % json.dumps(key))
        cases = out[key]
        for j, c in enumerate(cases):
            sys.stdout.write('  ' + json.dumps(c, ensure_ascii=False,
                                               sort_keys=True))
            sys.stdout.write(',\n' if j < len(cases) - 1 else '\n')
        sys.stdout.write(' ]' + (',\n' if i < len(out) - 1 else '\n'))
    sys.stdout.write('}\n')


if __name__ == '__main__':
    main()
