# ace-gym's env server (`ace-gym serve`) for OpenEnv: `docker build -t ace-gym .`, then
# `docker run -p 8000:8000 ace-gym` serves ACE-course-v0 at the root (what OpenEnv clients and
# openenv.yaml expect); `docker run -p 8000:8000 ace-gym --env ACE-meal-v0 ACE-course-v0` serves
# other ids (several: under /envs/<id>). See docs/server.md.
FROM python:3.12-slim

WORKDIR /app
COPY pyproject.toml README.md LICENSE ./
COPY ace_gym ./ace_gym
RUN pip install --no-cache-dir ".[serve]"

RUN useradd --create-home ace
USER ace
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)"
ENTRYPOINT ["ace-gym", "serve", "--host", "0.0.0.0", "--port", "8000"]
CMD ["--env", "ACE-course-v0"]
