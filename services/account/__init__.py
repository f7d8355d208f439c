"""The account service: accounts, sessions and API keys. Served by the query role."""

from __future__ import annotations

from mcpd.account.v1.account_service_pb2_grpc import add_AccountServiceServicer_to_server
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from services.account.accounts import Accounts
from services.account.servicer import AccountServicer

__all__ = ["Accounts", "registrations"]


def registrations(accounts: Accounts) -> list[ServiceRegistration]:
    """The gRPC services this role serves."""
    return [registration(AccountServicer(accounts), add_AccountServiceServicer_to_server)]
