import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "notifyflow.settings")
django_application = get_wsgi_application()

from api.base import ApiPathCheck  # noqa: E402 - once Django is set up

# A path under /api/ that is not UTF-8 is refused before Django rewrites it.
application = ApiPathCheck(django_application)

# What is loaded by now - Django, DRF, every view the URL conf imports - lives as long
# as the process: out of the garbage collector's generations (gc.freeze), a collection
# that a large request sets off (1,000 bulk items allocate enough for several) no longer
# walks it. That walk was ~20 % of a 1,000-item bulk request's CPU (bench/RESULTS.md,
# issue 29).
get_resolver().url_patterns  # noqa: B018 - imports the views now
gc.freeze()
