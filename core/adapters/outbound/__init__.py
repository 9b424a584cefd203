"""The server's requests to URLs someone else chose (web-push endpoints, answer callbacks, OAuth
client metadata documents), all made by one client under one policy (``client``), and how their
hosts are resolved (``resolver``)."""
