"""Sans-IO RocketMQ remoting protocol: frame codec, codes, message encodings. No asyncio here."""
