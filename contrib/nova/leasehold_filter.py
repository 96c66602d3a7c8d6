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
"""Nova scheduler filter that asks Leasehold which hosts a boot may use.

One POST to ``<endpoint>/scheduler/filter`` per scheduling request, with
the request's project, user, ``reservation`` hint, flavor extra specs and
every candidate host; Leasehold answers with the hosts that pass and a
reason for each other one (logged here at debug level). See README.md for
the nova.conf lines and the semantics.
"""

import copy
import logging

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from nova.scheduler import filters
from nova.scheduler import utils as scheduler_utils

LOG = logging.getLogger(__name__)

GROUP = 'leasehold'

# The auth plugin a service user normally has; its options are
# registered at import so that tools which set options in code
# (CONF.set_override) can set them. Any other plugin's options are
# registered when it is loaded.
DEFAULT_AUTH_PLUGIN = 'password'

leasehold_opts = [
    cfg.StrOpt('endpoint',
               help="Leasehold's Blazar API URL, ending in /v1 (for example "
                    "http://leasehold.example.org:1234/v1). When unset, the "
                    "'reservation' endpoint of the service catalog is used."),
    cfg.StrOpt('endpoint_type', default='internal',
               choices=['public', 'internal', 'admin'],
               help='Which catalog endpoint to use when endpoint is unset.'),
    cfg.StrOpt('region_name',
               help='Region of the catalog endpoint when endpoint is unset.'),
    cfg.BoolOpt('fail_open', default=False,
                help='When Leasehold cannot answer (unreachable, timeout, '
                     'error, malformed answer), pass every host (true) or '
                     'none (false: no boot lands on a reserved host while '
                     'Leasehold is down).'),
]

CONF = cfg.CONF


def register_opts(conf):
    """Register the [leasehold] options on conf (idempotent)."""
    conf.register_opts(leasehold_opts, group=GROUP)
    ks_loading.register_session_conf_options(conf, GROUP)
    ks_loading.register_auth_conf_options(conf, GROUP)
    _register_tolerant(conf, _optional(
        ks_loading.get_auth_plugin_conf_options(DEFAULT_AUTH_PLUGIN)))
    # A scheduling decision must not hang on a dead service.
    conf.set_default('timeout', 10, group=GROUP)


def list_opts():
    """The [leasehold] options, for oslo-config-generator."""
    return [(GROUP, leasehold_opts +
             ks_loading.get_session_conf_options() +
             ks_loading.get_auth_common_conf_options() +
             ks_loading.get_auth_plugin_conf_options(DEFAULT_AUTH_PLUGIN))]


def _optional(opts):
    # Registered ahead of use, a plugin's required options would stop
    # Nova from parsing its configuration when [leasehold] uses another
    # plugin (or this filter is not enabled at all); the plugin itself
    # checks them when it is loaded.
    out = []
    for opt in opts:
        opt = copy.copy(opt)
        opt.required = False
        out.append(opt)
    return out


def _register_tolerant(conf, opts):
    # Plugins share option names (auth_url, project_id, endpoint) with
    # slightly different help texts, which oslo.config refuses as
    # duplicates; the value is read the same way whichever was
    # registered first.
    for opt in opts:
        try:
            conf.register_opt(opt, group=GROUP)
        except cfg.DuplicateOptError:
            pass


def _load_auth(conf):
    name = conf[GROUP].auth_type
    if not name:
        return None
    loader = ks_loading.get_plugin_loader(name)
    _register_tolerant(conf, ks_loading.get_auth_plugin_conf_options(loader))

    def getter(opt):
        return conf[GROUP][opt.dest]

    return loader.load_from_options_getter(getter)


register_opts(CONF)


class LeaseholdFilter(filters.BaseHostFilter):
    """Pass the hosts Leasehold says the boot may use now.

    With hint ``reservation=<id>`` or an instance-reservation flavor, only
    that active reservation's hosts, for its own project; otherwise only
    hosts Leasehold does not manage. Rebuilds are not filtered.
    """

    run_filter_once_per_request = True

    def __init__(self):
        super().__init__()
        self._session = None
        self._url = None

    def host_passes(self, host_state, spec_obj):
        return bool(list(self.filter_all([host_state], spec_obj)))

    def filter_all(self, filter_obj_list, spec_obj):
        hosts = list(filter_obj_list)
        if not hosts or scheduler_utils.request_is_rebuild(spec_obj):
            return hosts
        by_name = {}
        for h in hosts:
            by_name.setdefault(_name(h), []).append(h)
        answer = self._ask(spec_obj, list(by_name))
        if answer is None:
            if CONF[GROUP].fail_open:
                LOG.warning('LeaseholdFilter: Leasehold did not answer; '
                            'passing all %d hosts (fail_open)', len(hosts))
                return hosts
            LOG.error('LeaseholdFilter: Leasehold did not answer; '
                      'refusing all %d hosts (fail_open is false)',
                      len(hosts))
            return []
        passing, rejected = answer
        if LOG.isEnabledFor(logging.DEBUG):
            for name in sorted(rejected):
                LOG.debug('LeaseholdFilter: host %(host)s rejected: '
                          '%(reason)s', {'host': name,
                                         'reason': rejected[name]})
        out = []
        for name in passing:
            out.extend(by_name.pop(name, []))
        return out

    def _ask(self, spec_obj, names):
        """POST the request; (passing names, {name: reason}) or None."""
        body = {
            'project_id': spec_obj.project_id,
            'user_id': _field(spec_obj, 'user_id'),
            'scheduler_hints': {},
            'flavor': {},
            'hosts': names,
            # The per-host lease detail costs Leasehold a read per host;
            # only worth it when the reasons are logged.
            'explain': LOG.isEnabledFor(logging.DEBUG),
        }
        hint = spec_obj.get_scheduler_hint('reservation')
        if hint:
            body['scheduler_hints']['reservation'] = hint
        flavor = _field(spec_obj, 'flavor')
        if flavor is not None:
            body['flavor']['extra_specs'] = dict(
                _field(flavor, 'extra_specs') or {})
        try:
            sess, url = self._client()
            resp = sess.post(url, json=body, raise_exc=False,
                             headers={'Accept': 'application/json'})
        except ks_exc.ClientException as e:
            LOG.error('LeaseholdFilter: POST to Leasehold failed: %s', e)
            return None
        except Exception as e:
            # A broken [leasehold] section (unknown auth plugin, missing
            # option) must not take the scheduler down: it is a failure
            # like any other, decided by fail_open.
            LOG.error('LeaseholdFilter: cannot call Leasehold: %s', e)
            return None
        if resp.status_code != 200:
            LOG.error('LeaseholdFilter: Leasehold answered %(status)s: '
                      '%(body)s', {'status': resp.status_code,
                                   'body': resp.text[:500]})
            return None
        try:
            doc = resp.json()
            passing = doc['hosts']
            rejected = doc.get('rejected') or {}
            if not (isinstance(passing, list) and
                    isinstance(rejected, dict)):
                raise ValueError('hosts is not a list')
        except (ValueError, KeyError, TypeError) as e:
            LOG.error('LeaseholdFilter: malformed answer from Leasehold: '
                      '%s', e)
            return None
        return passing, rejected

    def _client(self):
        if self._session is None:
            auth = _load_auth(CONF)
            sess = ks_loading.load_session_from_conf_options(
                CONF, GROUP, auth=auth)
            endpoint = CONF[GROUP].endpoint
            if not endpoint:
                endpoint = sess.get_endpoint(
                    service_type='reservation',
                    interface=CONF[GROUP].endpoint_type,
                    region_name=CONF[GROUP].region_name)
                if not endpoint:
                    raise ValueError('no [leasehold] endpoint and no '
                                     'reservation endpoint in the catalog')
            self._url = endpoint.rstrip('/') + '/scheduler/filter'
            self._session = sess
        return self._session, self._url


def _name(host_state):
    # Leasehold registers hosts by hypervisor hostname (Nova's nodename);
    # it also resolves a compute service host name with one node.
    return host_state.nodename or host_state.host


def _field(obj, name):
    # Nova objects raise on unset fields.
    try:
        return getattr(obj, name)
    except (AttributeError, NotImplementedError):
        return None
