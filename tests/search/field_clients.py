"""Our re-implementations of the field's own search clients, call for call (not their code).

Each function reproduces the request the upstream client sends and the way it reads
the reply, so a test that passes here passes with the upstream client:

* Search-R1 ``search_r1/llm_agent/generation.py`` (``LLMGenerationManager``):
  ``_batch_search`` posts ``{"queries", "topk", "return_scores": True}`` with
  ``requests.post(search_url, json=payload).json()``; ``batch_search`` reads
  ``["result"]`` with no error handling (a 4xx reply is a ``KeyError: 'result'``);
  ``_passages2string`` renders each hit as ``Doc {i}(Title: {first line}) {rest}\\n``.
* ASearcher ``tools/search_utils.py`` (``AsyncSearchBrowserClient``): ``query_async``
  posts the request meta to ``/retrieve`` with aiohttp, calls ``raise_for_status()``
  and reads ``r["contents"]`` and ``r["url"]`` of every hit of every query;
  ``access_async`` posts ``{"urls": urls}`` to ``/access`` and reads
  ``result["contents"]`` (``""`` for a null page).
* verl ``verl/tools/utils/search_r1_like_utils.py`` (github.com/volcengine/verl, read at
  b178a3cd56f58b2d502255daba591e92833930a7), what its ``SearchTool`` hands the model:
  ``call_search_api`` posts ``{"queries", "topk", "return_scores": True}`` with
  ``requests.post(url, headers=..., json=..., timeout=30)``, retries 500/502/503/504 and
  connection errors and timeouts, and on any other status calls ``raise_for_status()``,
  whose ``HTTPError`` text is kept as ``"API Request Error: {e}"`` (the body is never read);
  ``perform_single_search_batch`` then answers the model
  ``json.dumps({"result": f"Search error: {error}"})`` with the error prefixed
  ``"API Call Failed: "``, or the hits joined as ``Doc {i} (Title: {t})\n{text}``.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import requests


def searchr1_batch_search(search_url: str, queries: list[str], topk: int = 3) -> list[str]:
    """Search-R1's ``batch_search``: one request for every query of a turn, rendered per query."""
    payload = {"queries": queries, "topk": topk, "return_scores": True}
    results = requests.post(search_url, json=payload, timeout=600).json()["result"]
    return [searchr1_passages2string(result) for result in results]


def searchr1_passages2string(hits: list[dict[str, Any]]) -> str:
    """Search-R1's rendering of one query's hits: ``Doc {i}(Title: {first line}) {rest}\\n`` each, one-based."""
    rendered = []
    for number, hit in enumerate(hits, start=1):
        title, _, text = hit["document"]["contents"].partition("\n")
        rendered.append(f"Doc {number}(Title: {title}) {text}\n")
    return "".join(rendered)


async def asearcher_query(server_addr: str, req_meta: dict[str, Any]) -> list[dict[str, Any]]:
    """ASearcher's ``AsyncSearchBrowserClient.query_async`` (one attempt, no retry loop)."""
    async with aiohttp.ClientSession() as session, session.post(
            f"{server_addr}/retrieve", json=req_meta,
            timeout=aiohttp.ClientTimeout(total=120, sock_connect=120)) as response:
        response.raise_for_status()
        res = await response.json()
        return [{"documents": [r["contents"] for r in result], "urls": [r["url"] for r in result],
                     "server_type": "async-search-browser"} for result in res["result"]]


async def asearcher_access(server_addr: str, urls: list[str]) -> list[dict[str, Any]]:
    """ASearcher's ``AsyncSearchBrowserClient.access_async`` (one attempt, no retry loop)."""
    async with aiohttp.ClientSession() as session, session.post(
            f"{server_addr}/access", json={"urls": urls},
            timeout=aiohttp.ClientTimeout(total=120, sock_connect=120)) as response:
        response.raise_for_status()
        res = await response.json()
        return [{"page": result["contents"] if result is not None else "", "type": "access",
                     "server_type": "async-search-browser"} for result in res["result"]]


async def aethersearch_retrieve(server_addr: str, queries: list[str], topk: int = 3) -> list[list[dict[str, Any]]]:
    """AetherSearch ``agentic_rl/retriever/client.py`` (d2a21bd), ``AsyncHybridRetrieverClient``.

    Each batch posts ``{"queries", "topk", "return_scores": True, "mode": "hybrid"}`` (the
    mode is fixed) with aiohttp; a status of 400 or more is an error carrying the reply;
    ``protocol.parse_retrieval_payload`` then needs ``result`` with one list per query, reads
    each hit's ``document`` (or the hit itself), its ``contents`` (else ``text``: empty is an
    error), its ``id`` and its ``score`` (a float when present).
    """
    body = {"queries": queries, "topk": topk, "return_scores": True, "mode": "hybrid"}
    async with aiohttp.ClientSession() as session, session.post(f"{server_addr}/retrieve", json=body) as response:
        if response.status >= 400:
            raise RuntimeError(f"Retriever returned HTTP {response.status}: {await response.text()}")
        payload = await response.json()
    results = payload.get("result")
    if not isinstance(results, list) or len(results) != len(queries):
        raise ValueError("Retriever result cardinality mismatch")
    parsed: list[list[dict[str, Any]]] = []
    for hits in results:
        documents = []
        for item in hits:
            wrapped = item.get("document", item)
            contents = str(wrapped.get("contents", wrapped.get("text", "")))
            if not contents:
                raise ValueError("Retriever returned an empty document")
            score = item.get("score")
            documents.append({"id": str(wrapped.get("id", "")), "contents": contents,
                              "score": float(score) if score is not None else None})
        parsed.append(documents)
    return parsed


def verl_call_search_api(url: str, queries: list[str], topk: int = 3, timeout: int = 30,
                         retries: int = 10) -> tuple[dict[str, Any] | None, str | None]:
    """verl's ``call_search_api`` (b178a3c): ``(json, None)`` or ``(None, error)``, retries without the sleeps."""
    import json

    payload = {"queries": queries, "topk": topk, "return_scores": True}
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    last_error = None
    for attempt in range(retries):
        try:
            response = requests.post(url, headers=headers, json=payload, timeout=timeout)
            if response.status_code in [500, 502, 503, 504]:
                last_error = f"API Request Error: Server Error ({response.status_code}) on attempt {attempt + 1}/{retries}"
                continue
            response.raise_for_status()
            return response.json(), None
        except requests.exceptions.ConnectionError as e:
            last_error = f"Connection Error: {e}"
            continue
        except requests.exceptions.Timeout as e:
            last_error = f"Timeout Error: {e}"
            continue
        except requests.exceptions.RequestException as e:
            last_error = f"API Request Error: {e}"
            break
        except json.JSONDecodeError as e:
            last_error = f"API Response JSON Decode Error: {e}"
            break
    return None, f"API Call Failed: {last_error}" if last_error else "API Call Failed after retries"


def verl_search_tool_text(url: str, queries: list[str], topk: int = 3) -> str:
    """The text verl's ``SearchTool`` gives the model for one call (``perform_single_search_batch``, b178a3c)."""
    import json

    api_response, error_msg = verl_call_search_api(url, queries, topk)
    if error_msg:
        return json.dumps({"result": f"Search error: {error_msg}"}, ensure_ascii=False)
    if not api_response:
        return json.dumps({"result": "Unknown API state (no response and no error message)."}, ensure_ascii=False)
    raw_results = api_response.get("result", [])
    if not raw_results:
        return json.dumps({"result": "No search results found."}, ensure_ascii=False)
    pretty = []
    for retrieval in raw_results:
        reference = ""
        for idx, doc_item in enumerate(retrieval):
            content = doc_item["document"]["contents"]
            title = content.split("\n")[0]
            text = "\n".join(content.split("\n")[1:])
            reference += f"Doc {idx + 1} (Title: {title})\n{text}\n\n"
        pretty.append(reference.strip())
    return json.dumps({"result": "\n---\n".join(pretty)}, ensure_ascii=False)
