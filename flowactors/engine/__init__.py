"""The engines behind one seam. The core every engine shares: the session backend and its commit
order (``session_backend``), the trigger loop (``task``), the executor that hosts tasks and queues
(``executor``), the flow lifecycle (``controller``, driven by ``flowactors.driver``), transports
(``transport``), placement (``placement``), the tasks' writing of the log (``log_writer``), the
repository services (``repository_services``), queues (``queues``), what an operator does to a
flow's data (``flow_operations``) and the engine's errors (``errors``). An engine only hosts
components (``hosting``): the Ray engine in actors (``actors``), the in-process engine in this
process (``in_process``). The stateless engine (``stateless_engine``) runs the same tasks and
backend over a transaction a trigger, in memory. ``flowactors.testing`` runs one processor
through the same backend."""

#: the engines a flow runs on (``run_flow(flow, engine=...)``, ``flowactors run --engine``): "ray", an
#: actor per executor and repository (``actors.ray_hosting``); "in-process", this process, no Ray
#: (``in_process``); "stateless", the whole flow as one transaction a trigger, in memory (``stateless``)
ENGINES = ("ray", "in-process", "stateless")
#: seconds without progress, while processors fail, after which a run until idle ends as stalled
#: (``flowactors.driver.watch.IdleWatch``; ``flowactors run --stall-seconds``)
STALL_SECONDS = 10.0
#: ``max_restarts`` of every component's Ray actor: always restarted when its process dies, and
#: the controller repairs the flow from the log (``controller.FlowController.repair``)
ACTOR_RESTARTS = -1
#: seconds a stopping task may take to finish its session (``task.ProcessorTask.stop``)
STOP_TIMEOUT = 30.0
