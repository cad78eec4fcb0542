"""The staff console: server-rendered pages under ``/console`` for support, admin and approver
staff, served by the API process (``api.web.routes.install``).

- ``session``: signing in with a staff key, the session cookie, CSRF tokens.
- ``pages``: sign-in and sign-out, the search; ``users``: the user page; the timelines and
  the queues and actions have a module each.
- ``templating``: the Jinja2 templates (``templates/``) and their filters; ``static/`` holds
  the stylesheet and the one small script (copy buttons); nothing comes from another site.
- ``errors``: errors as pages (``api.problems`` hands them over for paths under /console).

Pages read through the services the API reads through; actions run through the API's own
code (idempotency, audit), so the console and the API always agree.
"""
