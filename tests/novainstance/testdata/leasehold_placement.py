"""Point nova-box at Leasehold's Placement instead of its in-process one.

nova_box.py (../shared/reference/openstack-harness) imports the modules of
NOVA_BOX_FILTERS before it installs Nova's PlacementFixture and before it
applies NOVA_BOX_CONF. Importing this module (as the filter
leasehold_placement.AllHostsFilter) therefore:

  * swaps the PlacementFixture for one that does nothing, so Nova's report
    client keeps its real HTTP methods and talks to the [placement]
    endpoint of the configuration (the fixture would patch them to call an
    in-process Placement);
  * registers the password auth options in [placement], so that
    NOVA_BOX_CONF may set username, password, auth_url, ... there (Nova
    registers them only when it first loads the auth plugin).

The filter itself passes every host: with Leasehold as Placement, the
allocation candidates alone keep a reservation flavor's servers on the
reserved hosts.
"""
import fixtures
from keystoneauth1 import loading
from nova import conf as nova_conf
from nova.scheduler.filters import all_hosts_filter
from nova.tests.functional import fixtures as func_fixtures


class _NoPlacementFixture(fixtures.Fixture):
    """Stands in for nova's PlacementFixture: Placement is outside."""

    api = None


func_fixtures.PlacementFixture = _NoPlacementFixture
nova_conf.CONF.register_opts(
    loading.get_auth_plugin_conf_options('password'), group='placement')

AllHostsFilter = all_hosts_filter.AllHostsFilter
