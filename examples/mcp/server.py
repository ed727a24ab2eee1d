"""An MCP server for recipes/mcp.yaml: a shop's price list and a multiplier, over stdio (the mcp
SDK's MCPServer). `python examples/mcp/server.py` serves it; the `mcp` env starts it itself.

Your own server is any MCP server that speaks stdio: the env lists its tools and calls them.
"""

from __future__ import annotations

from mcp.server import MCPServer

PRICES = {  # dollars per unit
    "apple": 2, "bagel": 3, "candle": 7, "donut": 4, "eraser": 1, "folder": 5, "glue": 6, "hammer": 19,
    "ink": 12, "jar": 8, "kettle": 31, "lamp": 27, "marker": 3, "napkin": 1, "onion": 2, "pencil": 2,
    "quilt": 58, "ruler": 4, "scarf": 17, "towel": 9, "umbrella": 22, "vase": 26, "wrench": 14, "yarn": 6,
}
server = MCPServer("shop")


@server.tool()
def price(item: str) -> str:
    """The price of one unit of an item, in dollars.

    Args:
        item: the item's name, e.g. "apple".
    """
    key = item.strip().lower().rstrip("s")
    if key not in PRICES:
        raise ValueError(f"no item {item!r}; the shop sells: {', '.join(sorted(PRICES))}")
    return str(PRICES[key])


@server.tool()
def multiply(a: float, b: float) -> str:
    """Multiply two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    product = a * b
    return str(int(product) if float(product).is_integer() else round(product, 4))


if __name__ == "__main__":
    server.run("stdio")
