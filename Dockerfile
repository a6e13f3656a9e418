FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY . .
RUN pip install --no-cache-dir -e . && python manage.py collectstatic --noinput -v0
ENV DJANGO_SETTINGS_MODULE=notifyflow.settings
EXPOSE 8000
