#!/usr/bin/env python3
"""A TCP proxy on loopback that delays every chunk it carries by --delay-ms, either way: the
latency of a far link, where this machine's kernel has no netem (scripts/remote-figure.sh).
Chunks in flight together arrive together, one delay after they were sent, not one delay after
another.

    delay_proxy.py --listen PORT --to PORT --delay-ms MS
"""

import argparse
import asyncio
import socket


async def pump(reader, writer, delay):
    """Passes what `reader` reads to `writer`, each chunk `delay` seconds after it arrived."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def send():
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(send())
    try:
        while True:
            data = await reader.read(1 << 16)
            queue.put_nowait((loop.time() + delay, data))
            if not data:
                break
        await sender
    except (ConnectionError, OSError):
        sender.cancel()
        writer.close()


async def serve(listen, to, delay):
    async def connection(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", to)
        except OSError:
            client_writer.close()
            return
        for writer in (client_writer, server_writer):
            writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(pump(client_reader, server_writer, delay),
                             pump(server_reader, client_writer, delay))
        client_writer.close()
        server_writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", listen, backlog=256)
    async with server:
        await server.serve_forever()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", type=int, required=True)
    parser.add_argument("--to", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, required=True)
    options = parser.parse_args()
    asyncio.run(serve(options.listen, options.to, options.delay_ms / 1e3))


if __name__ == "__main__":
    main()
