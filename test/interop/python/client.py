"""Drives the server with the official Python MCP client (mcp 2.3.0), pinned to 2026-07-28.

Usage: client.py <url | stdio:<node>:<dist/stdio.js>> <accept|decline>
Prints one JSON object: the era's protocol version, the tool names, a stock read and the order
attempt's structured result, plus every confirmation message the buyer was shown.
"""

import asyncio
import json
import os
import sys

import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ORDER = {
    "store_id": "47",
    "sku": "8847291",
    "quantity": 24,
    "reason": "Gap of 8 units at store 47 over 24h: on_hand 3 vs 11 sold. Buyer approved 24.",
}


async def main(target: str, answer: str) -> None:
    asked: list[str] = []

    async def on_elicit(_context, params):
        asked.append(params.message)
        if answer == "accept":
            return types.ElicitResult(action="accept", content={"confirm": True})
        return types.ElicitResult(action="decline")

    if target.startswith("stdio:"):
        _, node, script = target.split(":", 2)
        # The client passes a minimal environment by default: hand the server its settings.
        env = {k: v for k, v in os.environ.items() if k.startswith("KORRAL_") or k == "PATH"}
        server = StdioServerParameters(command=node, args=[script], env=env)
    else:
        server = target
    async with Client(server, mode="2026-07-28", elicitation_callback=on_elicit) as client:
        tools = await client.list_tools()
        stock = await client.call_tool(
            "get_stock_position", {"sku": "8847291", "store_ids": ["47", "102"]}
        )
        order = await client.call_tool("create_replenishment_order", ORDER)
        print(
            json.dumps(
                {
                    "tools": sorted(tool.name for tool in tools.tools),
                    "stock": stock.structured_content,
                    "order": order.structured_content,
                    "order_is_error": bool(order.is_error),
                    "asked": asked,
                }
            )
        )


asyncio.run(main(sys.argv[1], sys.argv[2]))
