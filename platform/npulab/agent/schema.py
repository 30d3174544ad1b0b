"""How the host token authentication appears in the OpenAPI schema."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension

from npulab.accounts.authentication import TokenAuthentication
from npulab.accounts.schema import TokenAuthenticationScheme


class HostTokenAuthenticationScheme(OpenApiAuthenticationExtension):
    """Host tokens go in the user tokens' header: the schema shows the one `tokenAuth` scheme.

    It defines no scheme of its own (the accounts app's names both kinds of key)
    and lists the requirement only where the view takes no user token, whose
    class lists it already.
    """

    target_class = "npulab.agent.authentication.HostTokenAuthentication"
    name: list[str] = []

    def get_security_definition(self, auto_schema) -> list:
        return []

    def get_security_requirement(self, auto_schema) -> dict | None:
        authenticators = auto_schema.view.get_authenticators()
        if any(isinstance(authenticator, TokenAuthentication) for authenticator in authenticators):
            return None
        return {TokenAuthenticationScheme.name: []}
