# One image for every process of docker-compose.yml (migrate, web, worker, beat): the
# command differs, the image does not.
FROM python:3.11-slim

# Static files are collected into the image (read-only at run time); var/ is the only
# writable place (the metrics directory, a filesystem broker if no URL is given).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=notifyflow.settings \
    NOTIFYFLOW_STATIC_ROOT=/app/static \
    NOTIFYFLOW_VAR_DIR=/app/var
WORKDIR /app

# Dependencies first: this layer is rebuilt only when pyproject.toml changes (the project
# installs no package of its own: the code runs from /app).
COPY pyproject.toml README.md ./
RUN pip install .

COPY . .
# collectstatic only reads settings: build-time values satisfy the production guards
# (nothing here is used at run time). Hashed, compressed files; no manifest warning.
RUN DJANGO_SECRET_KEY=build-only-not-a-secret-0123456789abcdef0123456789 \
    DJANGO_ALLOWED_HOSTS=localhost \
    EMAIL_BACKEND=django.core.mail.backends.locmem.EmailBackend SMS_BACKEND=locmem \
    python manage.py collectstatic --noinput -v0 \
    && rm -rf /app/var \
    && useradd --system --uid 10001 --no-create-home --home-dir /app notifyflow \
    && mkdir -p /app/var/prometheus \
    && chown -R notifyflow:notifyflow /app/var

# The code and the static files stay root's: the processes cannot change them.
USER notifyflow
EXPOSE 8000
CMD ["gunicorn", "notifyflow.wsgi:application", "-b", "0.0.0.0:8000", "-w", "4"]
