"""How the token authentication appears in the OpenAPI schema."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class TokenAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "npulab.accounts.authentication.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": (
                "`Token <key>`. User tokens (npl_…) come from the API tokens page or "
                "`manage.py api_token USERNAME`, with scopes: `read` (GET), `submit` (submit, "
                "cancel, restart runs; pin checkpoints), `admin` (known-good marks, snapshot "
                "requests). Host tokens (nph_…) come from `manage.py host_token NAME` and work "
                "only on /agent/."
            ),
        }
