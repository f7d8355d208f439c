"""Accounts, their sessions and their API keys."""

from __future__ import annotations

from mcpd.account.v1 import account_service_pb2_grpc
from mcpd.runtime.servicers import pending_rpcs


@pending_rpcs("the security and tenancy issue")
class AccountServicer(account_service_pb2_grpc.AccountServiceServicer):
    """Every RPC answers UNIMPLEMENTED until the security and tenancy issue lands."""
