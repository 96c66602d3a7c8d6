P = '+1111111-2222-3333-4444-555555555555'
X = '0x111111-2222-3333-4444-555555555555'
U1 = '11111111-2222-3333-4444-555555555555'


def mv(v):
    return {'openstack-api-version': 'placement %s' % v}


CASES = [
    ('POST', '/resource_providers', mv('1.20'), {'name': 'a', 'uuid': P}),
    ('POST', '/resource_providers', mv('1.20'), {'name': 'a', 'uuid': X}),
    ('POST', '/resource_providers', mv('1.20'), {'name': 'a', 'uuid': ' ' + U1[1:]}),
    ('POST', '/resource_providers', mv('1.20'), {'name': 'a', 'uuid': U1}),
    ('POST', '/resource_providers', mv('1.20'), {'name': 'b', 'parent_provider_uuid': P}),
    ('POST', '/resource_providers', mv('1.20'), {'name': 'b', 'parent_provider_uuid': 'urn:uuid:' + U1, 'uuid': '22222222-2222-3333-4444-555555555555'}),
    ('PUT', '/resource_providers/%s/aggregates' % U1, mv('1.1'), [P]),
    ('PUT', '/resource_providers/%s/aggregates' % U1, mv('1.1'), ['urn:uuid:' + U1, '{%s}' % U1.replace('1', '3')]),
    ('GET', '/resource_providers/%s/aggregates' % U1, mv('1.1')),
    ('PUT', '/resource_providers/%s/aggregates' % U1, mv('1.19'), {'aggregates': [U1, X], 'resource_provider_generation': 0}),
    ('GET', '/resource_providers?uuid=%2B1111111-2222-3333-4444-555555555555', mv('1.0')),
    ('GET', '/resource_providers?in_tree=0x111111-2222-3333-4444-555555555555', mv('1.14')),
    ('GET', '/resource_providers?in_tree=%7B' + U1 + '%7D', mv('1.14')),
    ('GET', '/resource_providers?member_of=urn:uuid:' + U1, mv('1.14')),
]
