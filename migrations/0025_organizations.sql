CREATE TABLE `organization_policies` (
	`organization_id` text PRIMARY KEY NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `organizations` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE `session_events` ADD `organization_id` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `organization_id` text;--> statement-breakpoint
CREATE INDEX `sessions_organization_id_idx` ON `sessions` (`organization_id`,`id`) WHERE "sessions"."organization_id" IS NOT NULL;