"""Horizon settings of Leasehold's browser test (tests/horizon).

Debian's openstack_dashboard.settings are the defaults; this module only
points them at the test's Keystone, keeps all state in memory or in the
test's work directory (LH_WORK_DIR), and enables the blazar-dashboard
plugin from its own enabled/ files, the way openstack_dashboard.settings
enables every dashboard it finds. Nothing under /etc is written.
"""

import os
import secrets

from openstack_dashboard.settings import *  # noqa: F401,F403
from openstack_dashboard.settings import HORIZON_CONFIG, INSTALLED_APPS
from openstack_dashboard.utils import settings as settings_utils

import blazar_dashboard.enabled

_work = os.environ["LH_WORK_DIR"]

# runserver --insecure serves the static files; DEBUG stays off so that a
# failure is a real 500 in the log, not a debug page.
DEBUG = False
SECRET_KEY = secrets.token_hex(32)
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
OPENSTACK_KEYSTONE_URL = os.environ["LH_KEYSTONE_URL"]
OPENSTACK_KEYSTONE_DEFAULT_ROLE = "member"
OPENSTACK_KEYSTONE_MULTIDOMAIN_SUPPORT = False
OPENSTACK_ENDPOINT_TYPE = "publicURL"

CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"

# Debian's package compressed its own pages offline; the plugin adds a
# stylesheet those pages never had, so compress on demand into the work
# directory instead of /var/lib/openstack-dashboard.
STATIC_ROOT = os.path.join(_work, "static")
COMPRESS_ROOT = STATIC_ROOT
COMPRESS_OFFLINE = False

# The plugin's enabled/ files, applied as openstack_dashboard.settings
# applies its own: update_dashboards replaces the panel lists it builds,
# so keep the dashboards' own and add the plugin's.
_kept = {k: HORIZON_CONFIG.get(k) for k in ("panel_customization", "header_sections", "dashboards", "extra_tabs", "extra_steps")}
HORIZON_CONFIG["dashboards"] = ()
settings_utils.update_dashboards([blazar_dashboard.enabled], HORIZON_CONFIG, INSTALLED_APPS)
HORIZON_CONFIG["panel_customization"] = list(_kept["panel_customization"] or []) + HORIZON_CONFIG["panel_customization"]
HORIZON_CONFIG["header_sections"] = list(_kept["header_sections"] or []) + HORIZON_CONFIG["header_sections"]
HORIZON_CONFIG["dashboards"] = tuple(_kept["dashboards"] or ()) + tuple(
    d for d in HORIZON_CONFIG["dashboards"] if d not in (_kept["dashboards"] or ()))
for _k in ("extra_tabs", "extra_steps"):
    _merged = dict(_kept[_k] or {})
    for _key, _defs in HORIZON_CONFIG[_k].items():
        _merged[_key] = tuple(_merged.get(_key, ())) + tuple(_defs)
    HORIZON_CONFIG[_k] = _merged

LOGGING["handlers"]["console"]["level"] = "INFO"  # noqa: F405
