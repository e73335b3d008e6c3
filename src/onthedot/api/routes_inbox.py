"""``/v1/inbox``: the results the inbox channel delivered to the caller, and marking them read.

Scoped by user like every other route: an item of another user is a 404, never a 403.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from onthedot.api.jsonbody import StrictJsonRoute
from onthedot.api.models import InboxList
from onthedot.api.routes_jobs import (
    COMMON_PROBLEMS,
    PageSize,
    PageToken,
    RuntimeDep,
    UserDep,
    _problems,
)
from onthedot.views import InboxItemOut

router = APIRouter(prefix="/v1", responses=COMMON_PROBLEMS, route_class=StrictJsonRoute,
                   tags=["inbox"])


@router.get("/inbox", response_model=InboxList)
async def list_inbox(
    rt: RuntimeDep, user: UserDep, page_size: PageSize = 20, page_token: PageToken = None,
    unread: Annotated[bool, Query(description="only items not read yet")] = False,
) -> InboxList:
    """Delivered results: unread first, each part newest first."""
    page = await rt.service.list_inbox(user, unread_only=unread, page_size=page_size,
                                       page_token=page_token)
    return InboxList(items=[InboxItemOut.of(i) for i in page.items],
                     next_page_token=page.next_page_token)


@router.post("/inbox/{item_id:id}:read", response_model=InboxItemOut, responses=_problems(404))
async def mark_read(item_id: str, rt: RuntimeDep, user: UserDep) -> InboxItemOut:
    """Mark an item read; marking it again keeps the first read time."""
    return InboxItemOut.of(await rt.service.mark_inbox_read(user, item_id))
