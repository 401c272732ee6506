"""Prometheus metrics of the broker and the name server: RocketMQ 5's names and labels, a layer over the
daemons' own services.

    names.py      metric names (as RocketMQ 5's Prometheus endpoint renders them) and label names
    families.py   prometheus_client metric families with the process's common labels, unchanged series kept
    rpc.py        rocketmq_rpc_latency and flow-control refusals: the remoting server's request observer
    lag.py        consumer lag, in-flight and ready messages (RocketMQ's ConsumerLagCalculator)
    broker.py     the broker's collector (traffic from BrokerStats, clients, store, backlogs, replication)
    namesrv.py    the name server's collector
    render.py     the exposition: prometheus_client's encoders, unchanged series' text kept between scrapes
    exporter.py   the HTTP endpoint (render.py's WSGI app in a bounded server thread)
    service.py    metricsExporterType / metricsPromExporterHost / metricsPromExporterPort: switching it on
"""
