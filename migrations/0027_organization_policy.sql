ALTER TABLE `organization_policies` ADD `ttl_seconds` integer;--> statement-breakpoint
ALTER TABLE `organization_policies` ADD `idle_timeout_seconds` integer;--> statement-breakpoint
ALTER TABLE `organization_policies` ADD `sliding_ttl` integer;--> statement-breakpoint
ALTER TABLE `organization_policies` ADD `max_lifetime_seconds` integer;--> statement-breakpoint
ALTER TABLE `organization_policies` ADD `max_per_user` integer;--> statement-breakpoint
ALTER TABLE `organization_policies` ADD `step_up_max_age_seconds` integer;--> statement-breakpoint
ALTER TABLE `organization_policies` ADD `context_device` text;--> statement-breakpoint
ALTER TABLE `organization_policies` ADD `context_network` text;--> statement-breakpoint
ALTER TABLE `organization_policies` ADD `context_travel` text;--> statement-breakpoint
ALTER TABLE `organization_policies` ADD `travel_max_kmh` integer;--> statement-breakpoint
ALTER TABLE `organization_policies` ADD `travel_min_km` integer;--> statement-breakpoint
ALTER TABLE `organization_policies` ADD `report_ttl_seconds` integer;