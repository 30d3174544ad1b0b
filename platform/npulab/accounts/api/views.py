"""The user's own API tokens through the API: list, make, revoke (the ``admin`` scope)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from npulab.accounts.api.serializers import (
    ApiTokenCreatedSerializer,
    ApiTokenCreateSerializer,
    ApiTokenSerializer,
)
from npulab.accounts.models import ApiToken, Scope
from npulab.accounts.services import (
    TokenExceedsParent,
    TokenOutlivesParent,
    do_issue_api_token,
    do_revoke_api_token,
)
from npulab.core import errors


class ApiTokenViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The caller's API tokens, newest first; the same as the API tokens page."""

    serializer_class = ApiTokenSerializer
    queryset = ApiToken.objects.none()  # for the schema; get_queryset serves requests
    filter_backends: list[Any] = []
    # Managing tokens is an operator's act: a token needs the admin scope.
    token_scope = Scope.ADMIN

    def get_queryset(self) -> QuerySet[ApiToken]:
        if getattr(self, "swagger_fake_view", False):
            return ApiToken.objects.none()
        return ApiToken.objects.filter(user=self.request.user)

    @extend_schema(request=ApiTokenCreateSerializer, responses={201: ApiTokenCreatedSerializer})
    def create(self, request: Request) -> Response:
        """Make a token; the answer's `token` is shown this once. A token may only make
        tokens with scopes it has itself, expiring no later than itself (`expires_days`
        is then required when it expires); revoking it revokes them."""
        data = ApiTokenCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        days = data.validated_data["expires_days"]
        try:
            token, plain = do_issue_api_token(
                request.user,
                name=data.validated_data["name"],
                scopes=data.validated_data["scopes"],
                expires=timezone.now() + timedelta(days=days) if days else None,
                parent=request.auth if isinstance(request.auth, ApiToken) else None,
            )
        except TokenExceedsParent as exc:
            raise PermissionDenied(str(exc), code=errors.INSUFFICIENT_SCOPE) from None
        except TokenOutlivesParent as exc:
            raise ValidationError({"expires_days": [str(exc)]}) from None
        body = ApiTokenCreatedSerializer(token).data
        body["token"] = plain
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: ApiTokenSerializer})
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str) -> Response:
        """Refuse the token from now on (a token may revoke itself)."""
        revoked = do_revoke_api_token(self.get_object(), by=request.user)
        return Response(ApiTokenSerializer(revoked).data)
