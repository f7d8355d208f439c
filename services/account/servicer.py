"""The account service's gRPC surface: thin methods over `Accounts`."""

from __future__ import annotations

from typing import Any

import grpc

from mcpd.account.v1 import account_service_pb2, account_service_pb2_grpc
from mcpd.auth.interceptor import client_address
from mcpd.auth.principal import current_principal
from mcpd.model.v1 import account_pb2
from services.account.accounts import Accounts

Context = grpc.aio.ServicerContext[Any, Any]


class AccountServicer(account_service_pb2_grpc.AccountServiceServicer):
    """Sign-up, login, the account, and its keys."""

    def __init__(self, accounts: Accounts) -> None:
        self._accounts = accounts

    async def Signup(
        self, request: account_pb2.AccountCredentials, context: Context
    ) -> account_pb2.AccountSession:
        return await self._accounts.signup(request.email, request.password)

    async def Login(
        self, request: account_pb2.AccountCredentials, context: Context
    ) -> account_pb2.AccountSession:
        return await self._accounts.login(request.email, request.password, client_address(context))

    async def GetAccount(
        self, request: account_service_pb2.GetAccountRequest, context: Context
    ) -> account_pb2.Account:
        return await self._accounts.get_account(current_principal())

    async def ListKeys(
        self, request: account_service_pb2.ListKeysRequest, context: Context
    ) -> account_service_pb2.ListKeysResponse:
        keys = await self._accounts.list_keys(current_principal())
        return account_service_pb2.ListKeysResponse(keys=keys)

    async def CreateKey(
        self, request: account_pb2.CreateAccountKeyRequest, context: Context
    ) -> account_pb2.CreatedAccountKey:
        return await self._accounts.create_key(current_principal(), request)

    async def RevokeKey(
        self, request: account_service_pb2.RevokeKeyRequest, context: Context
    ) -> account_pb2.AccountKey:
        return await self._accounts.revoke_key(current_principal(), request.id)
