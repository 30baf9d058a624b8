"""Push: subscriptions, route versions and the change detector, broker arrivals and
departures, machine pressure, and the tick that sends the notifications.
"""
