FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY . .
# collectstatic only reads settings: build-time values for the production guards.
RUN pip install --no-cache-dir -e . && DJANGO_SECRET_KEY=build-only-not-a-secret-0123456789abcdef0123456789 \
    DJANGO_ALLOWED_HOSTS=localhost EMAIL_BACKEND=django.core.mail.backends.locmem.EmailBackend \
    SMS_BACKEND=locmem python manage.py collectstatic --noinput -v0
ENV DJANGO_SETTINGS_MODULE=notifyflow.settings
EXPOSE 8000
